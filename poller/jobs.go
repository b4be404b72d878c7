package poller

import (
	"context"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// runJob runs a job on its schedule until ctx ends. run returns the rows it
// touched and whether it was skipped (lease held elsewhere).
func (p *Poller) runJob(ctx context.Context, name string, sched Schedule, wake <-chan struct{},
	run func(ctx context.Context) (rows int, skipped bool, err error)) {
	s := sched.strategy()
	delay := sched.Min
	for p.sleep(ctx, delay, wake) {
		start := p.config.Clock.Now()
		var rows int
		var skipped bool
		err := p.withConn(ctx, func() error {
			var err error
			rows, skipped, err = run(ctx)
			return err
		})
		delay = s.next(rows > 0)
		if err != nil && ctx.Err() == nil {
			p.logger.Error("Job failed", err, watermill.LogFields{"job": name, "next_delay": delay})
		}
		if rows > 0 {
			p.logger.Info("Job done", watermill.LogFields{"job": name, "rows": rows})
		}
		p.config.Hooks.JobDone(JobInfo{Job: name, Skipped: skipped, Rows: rows,
			Duration: p.config.Clock.Since(start), NextDelay: delay, Err: err})
	}
}

// repeat executes the statements q() builds until one touches fewer than
// limit rows, and returns the total.
func (p *Poller) repeat(ctx context.Context, limit int, q func() dialects.Query) (int, error) {
	total := 0
	for ctx.Err() == nil {
		query := q()
		res, err := p.db.ExecContext(ctx, query.SQL, query.Args...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += int(n)
		if int(n) < limit {
			break
		}
	}
	return total, ctx.Err()
}

// recoveryLoop returns rows stuck IN_PROCESS for longer than
// max-batch-processing-time to PENDING, without counting an attempt: the
// instance that claimed them died or hung, and the events never had a chance
// to fail.
func (p *Poller) recoveryLoop(ctx context.Context) {
	limit := p.config.JobBatchSize
	p.runJob(ctx, JobRecovery, p.config.Recovery, nil, func(ctx context.Context) (int, bool, error) {
		n, err := p.repeat(ctx, limit, func() dialects.Query {
			now := p.config.Clock.Now().UTC()
			return p.d.EventsRecover(now.Add(-p.config.Oncebox.Outbox.MaxBatchProcessingTime), now, limit)
		})
		if n > 0 {
			p.logger.Info("Recovered stuck events", watermill.LogFields{"rows": n})
		}
		return n, false, err
	})
}

// dlqLoop moves FAILED rows to the DLQ table.
func (p *Poller) dlqLoop(ctx context.Context) {
	limit := p.config.JobBatchSize
	p.runJob(ctx, JobDLQTransfer, p.config.DLQTransfer, p.dlqWake, func(ctx context.Context) (int, bool, error) {
		n, err := p.repeat(ctx, limit, func() dialects.Query {
			return p.d.EventsMoveToDLQ(p.config.Clock.Now().UTC(), limit)
		})
		return n, false, err
	})
}

// cleanUpLoop deletes PROCESSED rows older than the ttl, in batches, on one
// instance at a time: the lease "outbox-clean-up" in the jobs table.
func (p *Poller) cleanUpLoop(ctx context.Context) {
	cfg := p.config.Oncebox.Outbox.CleanUp
	p.runJob(ctx, JobOutboxCleanUp, p.config.CleanUp, nil, func(ctx context.Context) (int, bool, error) {
		le, ok, err := p.locker.TryAcquire(ctx, JobOutboxCleanUp, p.config.CleanUpLease)
		if err != nil || !ok {
			return 0, !ok && err == nil, err
		}
		n, runErr := p.repeat(ctx, cfg.BatchSize, func() dialects.Query {
			return p.d.EventsDeleteProcessed(p.config.Clock.Now().UTC().Add(-cfg.TTL), cfg.BatchSize)
		})
		relCtx, cancel := p.finalizeCtx()
		defer cancel()
		if err := p.locker.Release(relCtx, le, p.config.CleanUp.Min); err != nil && runErr == nil {
			runErr = err
		}
		return n, false, runErr
	})
}
