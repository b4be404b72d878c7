package oncebox

import "time"

// Clock is the time of a component: the type of the Clock field of the
// configs of packages publisher, poller, middleware, subscriber, dlq and
// metrics. A nil Clock means the real clock (package time); tests pass a
// fake one to drive delays and timestamps without waiting.
//
// Its methods are those of package time, so the fake clocks of the test
// libraries modelled on it satisfy it as they are. A component that stops
// waiting early (a wake-up, Close) stops the timer it waited on when the
// clock also has a method NewTimer(time.Duration) whose result has the
// methods Chan() <-chan time.Time and Stop() bool: a fake clock that counts
// the timers waiting on it then counts none that was abandoned. On a clock
// without it the channel of an abandoned After fires unread when its time
// comes. docs/testing.md has an example.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// After returns a channel that receives the current time once d has
	// elapsed.
	After(d time.Duration) <-chan time.Time
}
