package publisher

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// limiter is the process-wide limiter of wake-up notifications: every
// Publisher of the process shares it, because a Publisher lives for one
// transaction and the cost it bounds (the commit of a transaction that
// notified takes PostgreSQL's global notification-queue lock) is the
// process's, not the transaction's. It is River's notifylimiter, keyed by
// channel and payload.
var limiter = newNotifyLimiter()

// limiterSize bounds the limiter's entries (one per channel and event type
// recently notified; about 180 bytes each). When a process notifies more
// types than that, the least recently notified is forgotten: its next
// notification goes out even if one went out less than the window before,
// which costs one notification more, never an event. With the default
// 5 ms window, forgetting an entry early needs 4,096 other types notified
// within 5 ms.
const limiterSize = 4096

type notifyKey struct{ channel, payload string }

type notifyLimiter struct {
	mu   sync.Mutex
	last *simplelru.LRU[notifyKey, time.Time] // guarded by mu
}

func newNotifyLimiter() *notifyLimiter {
	lru, err := simplelru.NewLRU[notifyKey, time.Time](limiterSize, nil)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &notifyLimiter{last: lru}
}

// allow reports whether a notification of k may go out at now: none went
// out less than window before. It records now when it answers yes. A
// window <= 0 always answers yes.
func (l *notifyLimiter) allow(k notifyKey, now time.Time, window time.Duration) bool {
	if window <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last.Peek(k); ok && now.Sub(last) < window && !now.Before(last) {
		return false
	}
	l.last.Add(k, now)
	return true
}

// len is the number of entries the limiter holds.
func (l *notifyLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last.Len()
}
