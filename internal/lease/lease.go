// Package lease is the distributed lock of the clean-up jobs: a lease in the
// jobs table with an owner, taken for at most one duration and, once
// released, kept for at least another, so that one instance at a time runs a
// job and no instance reruns it right after another finished.
package lease

import (
	"context"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/dbexec"
)

// Leases is what a Locker asks of the dialect: the lease methods of
// dialects.Relay.
type Leases interface {
	AcquireLease(ctx context.Context, db wsql.ContextExecutor, l dialects.Lease) (bool, error)
	ReleaseLease(ctx context.Context, db wsql.Beginner, l dialects.Lease) error
}

// Locker takes and releases leases for one owner.
type Locker struct {
	db    wsql.Beginner
	d     Leases
	owner string
	clock oncebox.Clock
}

// NewLocker returns a Locker acting as owner, on c (the real clock when
// nil).
func NewLocker(db wsql.Beginner, d Leases, owner string, c oncebox.Clock) *Locker {
	return &Locker{db: db, d: d, owner: owner, clock: clock.Or(c)}
}

// TryAcquire takes the lease of job name for at most atMost, unless another
// owner holds a live lease. It never waits.
func (l *Locker) TryAcquire(ctx context.Context, name string, atMost time.Duration) (dialects.Lease, bool, error) {
	now := l.clock.Now().UTC()
	le := dialects.Lease{Name: name, Owner: l.owner, LockedAt: now, Until: now.Add(atMost)}
	ok, err := l.d.AcquireLease(ctx, l.db, le)
	if err != nil {
		return le, false, fmt.Errorf("oncebox: acquire lease %q: %w", name, err)
	}
	return le, ok, nil
}

// Release ends le at the later of now and its start plus atLeast.
func (l *Locker) Release(ctx context.Context, le dialects.Lease, atLeast time.Duration) error {
	le.Until = l.clock.Now().UTC()
	if min := le.LockedAt.Add(atLeast); le.Until.Before(min) {
		le.Until = min
	}
	if err := l.d.ReleaseLease(ctx, l.db, le); err != nil {
		return fmt.Errorf("oncebox: release lease %q: %w", le.Name, err)
	}
	return nil
}

// Held is a lease as TryAcquire returns it.
type Held = dialects.Lease

// RunLocked runs fn under the lease of job name when it can be taken, and
// releases it afterwards, keeping it at least atLeast. ran is false when
// another owner held the lease. The release runs even when ctx was cancelled
// during fn, on a context of its own bounded by releaseTimeout.
func (l *Locker) RunLocked(ctx context.Context, name string, atMost, atLeast, releaseTimeout time.Duration,
	fn func(ctx context.Context) error) (ran bool, err error) {
	le, ok, err := l.TryAcquire(ctx, name, atMost)
	if err != nil || !ok {
		return false, err
	}
	runErr := fn(ctx)
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := l.Release(relCtx, le, atLeast); err != nil && runErr == nil {
		runErr = err
	}
	return true, runErr
}

// CleanUp deletes rows in batches under the lease of job name: deleteBatch,
// which deletes up to limit rows and returns how many it deleted, runs
// again while a batch deletes limit rows (dbexec.Repeat) and the lease is
// held. skipped is true when another owner held the lease. Every clean-up
// job (outbox, DLQ, inbox) is this.
func (l *Locker) CleanUp(ctx context.Context, name string, atMost, atLeast, releaseTimeout time.Duration,
	limit int, deleteBatch func(ctx context.Context) (int64, error)) (rows int, skipped bool, err error) {
	ran, err := l.RunLocked(ctx, name, atMost, atLeast, releaseTimeout, func(ctx context.Context) error {
		var err error
		rows, err = dbexec.Repeat(ctx, limit, func(ctx context.Context) (int, error) {
			n, err := deleteBatch(ctx)
			return int(n), err
		})
		return err
	})
	return rows, !ran && err == nil, err
}
