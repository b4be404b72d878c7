package publisher

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// DefaultWakeLimit is the default of Config.WakeLimit.
const DefaultWakeLimit = 5 * time.Millisecond

// limiter is the process-wide limiter of wake-up notifications: every
// Publisher of the process shares it, because a Publisher lives for one
// transaction and the cost it bounds (the commit of a transaction that
// notified takes PostgreSQL's global notification-queue lock) is the
// process's, not the transaction's. It is River's notifylimiter, keyed by
// channel and payload.
var limiter = notifyLimiter{last: map[notifyKey]time.Time{}}

type notifyKey struct{ channel, payload string }

type notifyLimiter struct {
	mu   sync.Mutex
	last map[notifyKey]time.Time
}

// allow reports whether a notification of k may go out at now: none went
// out less than window before. It records now when it answers yes. A
// window <= 0 always answers yes. The map holds one entry per channel and
// event type the process ever notified: a few hundred at most.
func (l *notifyLimiter) allow(k notifyKey, now time.Time, window time.Duration) bool {
	if window <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last[k]; ok && now.Sub(last) < window && !now.Before(last) {
		return false
	}
	l.last[k] = now
	return true
}

// notify adds the wake-up notification of eventType to the transaction,
// unless this Publisher already did (PostgreSQL would fold it anyway; this
// saves the round trip), the dialect cannot, it is disabled, or the
// process-wide limiter says one went out less than WakeLimit ago.
//
// A skipped notification costs latency, never an event: the relay still
// polls. The notification it relied on was queued by another transaction
// at most WakeLimit before; if that one commits, its wake-up makes the
// relay poll, and a poll min-fixed-delay later (the relay's follow-up after
// every wake-up) finds this event if it committed by then. If it rolls
// back, or this transaction commits later than that, the event waits for
// the next notification of its type or the relay's next poll at its
// current delay, at most max-fixed-delay (docs/design.md, "Wake-up on
// commit").
func (p *Publisher) notify(ctx context.Context, eventType string) error {
	if p.config.DisableWakeOnCommit {
		return nil
	}
	p.notifiedMu.Lock()
	done := p.notified[eventType]
	p.notifiedMu.Unlock()
	if done {
		return nil
	}
	channel := dialects.NotifyChannel(p.config.Dialect.Tables())
	q := p.config.Dialect.Notify(channel, eventType)
	if q.SQL == "" {
		return nil
	}
	window := p.config.WakeLimit
	if window == 0 {
		window = DefaultWakeLimit
	}
	if !limiter.allow(notifyKey{channel, eventType}, p.config.Clock.Now(), window) {
		return nil
	}
	if _, err := p.db.ExecContext(ctx, q.SQL, q.Args...); err != nil {
		// On PostgreSQL a failed statement aborts the transaction, so the
		// events cannot commit either: report it like a failed insert.
		return fmt.Errorf("oncebox: publish events of type %q: wake-up notification on channel %q: %w", eventType, channel, err)
	}
	p.notifiedMu.Lock()
	if p.notified == nil {
		p.notified = map[string]bool{}
	}
	p.notified[eventType] = true
	p.notifiedMu.Unlock()
	return nil
}
