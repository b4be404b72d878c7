// Package clock gives oncebox's components their time: the real clock when
// a config's Clock is nil, and timers that can be stopped on any
// oncebox.Clock.
package clock

import (
	"reflect"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// Real is the real clock: package time.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Since returns time.Since(t).
func (Real) Since(t time.Time) time.Duration { return time.Since(t) }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Or returns c, or the real clock when c is nil.
func Or(c oncebox.Clock) oncebox.Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Timer is a wait on a clock that can be stopped.
type Timer interface {
	// Chan receives the time once the wait is over.
	Chan() <-chan time.Time
	// Stop ends the wait; it reports whether the timer was still waiting
	// (always false for a clock without NewTimer).
	Stop() bool
}

// NewTimer starts a wait of d on c (the real clock when c is nil). The
// caller stops it when it stops waiting early.
//
// oncebox.Clock holds only standard-library types, so that the API names no
// test library; a fake clock's timers, which its waiter count includes until
// they are stopped, have its own type. NewTimer therefore calls c's method
// NewTimer(time.Duration) when c has one whose result has Chan and Stop (a
// reflect call: its result type is the fake clock library's, which this
// module does not import), and falls back to c.After, whose wait cannot be
// stopped, otherwise.
func NewTimer(c oncebox.Clock, d time.Duration) Timer {
	switch c.(type) {
	case nil, Real:
		return realTimer{time.NewTimer(d)}
	}
	if m := reflect.ValueOf(c).MethodByName("NewTimer"); m.IsValid() && makesTimer(m.Type()) {
		if t, ok := m.Call([]reflect.Value{reflect.ValueOf(d)})[0].Interface().(Timer); ok {
			return t
		}
	}
	return afterTimer(c.After(d))
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	timerType    = reflect.TypeFor[Timer]()
)

// makesTimer reports whether f is a func(time.Duration) T where T has the
// methods of Timer.
func makesTimer(f reflect.Type) bool {
	return f.NumIn() == 1 && f.In(0) == durationType && !f.IsVariadic() &&
		f.NumOut() == 1 && f.Out(0).Implements(timerType)
}

// realTimer is a Timer of package time.
type realTimer struct{ *time.Timer }

// Chan returns the timer's channel.
func (t realTimer) Chan() <-chan time.Time { return t.C }

// afterTimer is the channel of a clock's After: a wait that cannot be
// stopped, and fires unread.
type afterTimer <-chan time.Time

// Chan returns the channel.
func (t afterTimer) Chan() <-chan time.Time { return t }

// Stop does nothing and returns false.
func (afterTimer) Stop() bool { return false }
