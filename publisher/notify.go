package publisher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// DefaultWakeLimit is the default of Config.WakeLimit.
const DefaultWakeLimit = 5 * time.Millisecond

// DefaultWakeQueueLimit is the default of Config.WakeQueueLimit: the
// publisher stops notifying once PostgreSQL's notification queue is half
// full.
const DefaultWakeQueueLimit = 0.5

// DefaultWakeQueueCheck is the default of Config.WakeQueueCheck.
const DefaultWakeQueueCheck = 10 * time.Second

// ReadQueueUsage returns the default of Config.WakeQueueUsage for the
// dialect d: d's reading of PostgreSQL's notification queue usage
// (dialects.OutboxWriter.NotifyQueueUsage, a read-only function: no lock,
// no write) through tx, the transaction being published in. A function
// given in WakeQueueUsage may wrap it.
func ReadQueueUsage(d dialects.OutboxWriter) func(ctx context.Context, tx sql.ContextExecutor) (float64, error) {
	return d.NotifyQueueUsage
}

// readDefaultUsage, when set, replaces the default reading
// (ReadQueueUsage); a test sets one that fails.
var readDefaultUsage func(ctx context.Context, tx sql.ContextExecutor) (float64, error)

// defaultUsage is the default reading: ReadQueueUsage of the dialect, or
// readDefaultUsage.
func (p *Publisher) defaultUsage() func(ctx context.Context, tx sql.ContextExecutor) (float64, error) {
	if readDefaultUsage != nil {
		return readDefaultUsage
	}
	return ReadQueueUsage(p.w)
}

// usageSavepoint names the savepoint around the default reading.
const usageSavepoint = "oncebox_wake_queue_usage"

// readUsageSafely makes the default reading under a savepoint (the
// dialect's Savepoint): should it fail, the savepoint is rolled back, the
// transaction goes on and ok is false (this transaction does not notify:
// the relay polls; the next reading is WakeQueueCheck later). A failed
// statement aborts a PostgreSQL transaction, so without the savepoint the
// wake-up, an optimisation, would fail the business write. Two statements
// more, once per WakeQueueCheck per process and channel. The error is
// returned only when the savepoint itself cannot be set or rolled back (the
// transaction is then unusable).
func (p *Publisher) readUsageSafely(ctx context.Context, channel string) (usage float64, ok bool, err error) {
	read := p.defaultUsage()
	readErr, err := p.w.Savepoint(ctx, p.db, usageSavepoint, func() error {
		var err error
		usage, err = read(ctx, p.db)
		return err
	})
	switch {
	case err != nil && readErr != nil:
		return 0, false, errors.Join(readErr, err)
	case err != nil:
		return 0, false, err
	case readErr != nil:
		p.logger.Error("Could not read PostgreSQL's notification queue usage: this transaction sends no wake-up notification",
			readErr, watermill.LogFields{"channel": channel})
		return 0, false, nil
	}
	return usage, true, nil
}

// queueUsage is the process-wide cache of the notification queue's usage,
// one reading per channel (the queue is the server's; keying by channel
// keeps two servers apart unless they share the tables' names, and then it
// reads one for the other for at most WakeQueueCheck). Like the limiter it
// is shared by every Publisher of the process: a Publisher lives for one
// transaction, and the reading must not cost one statement per transaction.
var queueUsage = usageCache{readings: map[string]*usageReading{}}

type usageCache struct {
	mu       sync.Mutex
	readings map[string]*usageReading
}

type usageReading struct {
	at    time.Time // when the last reading was started
	usage float64
	full  bool // usage >= the limit at the last reading
}

// notify adds the wake-up notification of eventType to the transaction,
// unless this Publisher already did (PostgreSQL would fold it anyway; this
// saves the round trip), the dialect cannot, it is disabled, the
// notification queue is WakeQueueLimit full (queueFull), or the
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
	if !p.w.CanNotify() {
		return nil
	}
	channel := dialects.NotifyChannel(p.config.Dialect.Tables())
	full, err := p.queueFull(ctx, channel)
	if err != nil {
		// On PostgreSQL a failed statement aborts the transaction: report
		// it like a failed insert.
		return fmt.Errorf("oncebox: publish events of type %q: read the notification queue usage (publisher.Config.WakeQueueUsage): %w", eventType, err)
	}
	if full {
		return nil
	}
	window := p.config.WakeLimit
	if window == 0 {
		window = DefaultWakeLimit
	}
	if !limiter.allow(notifyKey{channel, eventType}, p.config.Clock.Now(), window) {
		return nil
	}
	if err := p.w.Notify(ctx, p.db, channel, eventType); err != nil {
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

// queueFull reports whether the notification queue's usage, as last read
// for channel, is at or above Config.WakeQueueLimit; it reads it again
// (through Config.WakeQueueUsage) when the last reading started
// WakeQueueCheck or more ago, in the one transaction that finds it so:
// the others meanwhile use the last reading. The first reading of the
// process is made by its first notifying transaction, counted as 0 by the
// transactions that run beside it.
//
// Why: a full queue makes every transaction that ran NOTIFY fail at
// COMMIT ("too many notifications in the NOTIFY queue"), so the wake-up, an
// optimisation, would take the business writes down with it. A skipped
// notification costs latency only: the relay still polls, at most
// max-fixed-delay later.
func (p *Publisher) queueFull(ctx context.Context, channel string) (bool, error) {
	limit := p.config.WakeQueueLimit
	if limit == 0 {
		limit = DefaultWakeQueueLimit
	}
	if limit < 0 {
		return false, nil
	}
	every := p.config.WakeQueueCheck
	if every <= 0 {
		every = DefaultWakeQueueCheck
	}
	now := p.config.Clock.Now()
	queueUsage.mu.Lock()
	r := queueUsage.readings[channel]
	if r == nil {
		r = &usageReading{}
		queueUsage.readings[channel] = r
	} else if now.Sub(r.at) < every && !now.Before(r.at) {
		full := r.full
		queueUsage.mu.Unlock()
		return full, nil
	}
	r.at = now // this transaction reads; the others use the last reading
	queueUsage.mu.Unlock()

	var (
		usage float64
		err   error
	)
	switch {
	case p.config.WakeQueueUsage != nil:
		usage, err = p.config.WakeQueueUsage(ctx, p.db)
	case p.config.AllowNonTransactionalDangerously && !isTx(p.db):
		// No transaction to abort (and none to set a savepoint in).
		usage, err = p.defaultUsage()(ctx, p.db)
	default:
		var ok bool
		if usage, ok, err = p.readUsageSafely(ctx, channel); err == nil && !ok {
			// No reading: no notification from this transaction (the relay
			// polls); the others keep the last reading until the next one.
			return true, nil
		}
	}
	if err != nil {
		return false, err
	}
	full := usage >= limit
	queueUsage.mu.Lock()
	was := r.full
	r.usage, r.full = usage, full
	queueUsage.mu.Unlock()
	fields := watermill.LogFields{"channel": channel, "usage": usage, "limit": limit}
	switch {
	case full && !was:
		p.logger.Error("PostgreSQL's notification queue is filling up (a listener sits in an open transaction?): "+
			"wake-up notifications suspended, the relay polls at its pace",
			fmt.Errorf("notification queue usage %g is at or above publisher.Config.WakeQueueLimit %g", usage, limit), fields)
	case !full && was:
		p.logger.Info("PostgreSQL's notification queue drained: wake-up notifications resumed", fields)
	}
	return full, nil
}
