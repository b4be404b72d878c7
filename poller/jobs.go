package poller

import (
	"context"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/internal/dbexec"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// runJob runs a job on its schedule until ctx ends, holding a connection
// slot for each run, and reports each run to the logger and the hooks.
func (p *Poller) runJob(ctx context.Context, name string, sched Schedule, wake <-chan struct{},
	run func(ctx context.Context) (rows int, skipped bool, err error)) {
	pacing.RunJob(ctx, p.config.Clock, sched, wake, func(ctx context.Context) pacing.JobResult {
		var r pacing.JobResult
		r.Err = p.withConn(ctx, func() error {
			var err error
			r.Rows, r.Skipped, err = run(ctx)
			return err
		})
		return r
	}, func(r pacing.JobResult, took, next time.Duration) {
		p.jobDone(ctx, name, r, took, next)
	})
}

// jobDone reports one run of a job to the logger and the hooks.
func (p *Poller) jobDone(ctx context.Context, name string, r pacing.JobResult, took, next time.Duration) {
	if r.Err != nil && ctx.Err() == nil {
		p.logger.Error("Job failed", r.Err, watermill.LogFields{"job": name, "next_delay": next})
	}
	if r.Rows > 0 {
		p.logger.Info("Job done", watermill.LogFields{"job": name, "rows": r.Rows})
	}
	p.config.Hooks.JobDone(JobInfo{Job: name, Skipped: r.Skipped, Rows: r.Rows, Duration: took, NextDelay: next, Err: r.Err})
}

// The recovery (rows of a dead or hung instance back to PENDING without
// counting an attempt: the events never had a chance to fail) runs in
// keepLoop, with the heartbeat: heartbeat.go.

// dlqLoop moves FAILED rows to the DLQ table.
func (p *Poller) dlqLoop(ctx context.Context) {
	limit := p.config.JobBatchSize
	p.runJob(ctx, JobDLQTransfer, p.config.DLQTransfer, p.dlqWake, func(ctx context.Context) (int, bool, error) {
		n, err := dbexec.Repeat(ctx, limit, func(ctx context.Context) (int, error) {
			return p.d.MoveToDLQ(ctx, p.db, p.config.Clock.Now().UTC(), limit)
		})
		return n, false, err
	})
}

// cleanUpLoop deletes PROCESSED rows older than the ttl, in batches, on one
// instance at a time: the lease "outbox-clean-up" in the jobs table. Under
// the same lease, after a run that deleted rows, it deletes the heartbeats
// of instances gone without Close (one statement; the table holds a
// handful of rows): a heartbeat older than max-batch-processing-time
// changes no recovery, since the claims of its instance are recoverable by
// that bound anyway.
func (p *Poller) cleanUpLoop(ctx context.Context) {
	cfg := p.config.Oncebox.Outbox.CleanUp
	p.runJob(ctx, JobOutboxCleanUp, p.config.CleanUp, nil, func(ctx context.Context) (int, bool, error) {
		rows := 0
		ran, err := p.locker.RunLocked(ctx, JobOutboxCleanUp, p.config.CleanUpLease, p.config.CleanUp.Min, p.config.FinalizeTimeout,
			func(ctx context.Context) error {
				if err := p.maintainPartitions(ctx); err != nil {
					return err
				}
				var err error
				rows, err = dbexec.Repeat(ctx, cfg.BatchSize, func(ctx context.Context) (int, error) {
					n, err := p.d.DeleteProcessed(ctx, p.db, p.config.Clock.Now().UTC().Add(-cfg.TTL), cfg.BatchSize)
					return int(n), err
				})
				if err != nil || rows == 0 {
					// Only after traffic: an instance writes a heartbeat
					// only while it holds claims, and the rows it sent are
					// deleted here once their ttl is past, so an idle
					// outbox pays nothing for this.
					return err
				}
				gone := p.config.Clock.Now().UTC().Add(-p.config.Oncebox.Outbox.MaxBatchProcessingTime)
				_, err = p.d.DeleteInstancesBefore(ctx, p.db, gone)
				return err
			})
		return rows, !ran && err == nil, err
	})
}

// maintainPartitions runs the partition maintenance of the outbox
// (outbox.partitions, PostgreSQL) under the clean-up lease, before the row
// clean-up: partitions created ahead, expired partitions holding only
// PROCESSED rows dropped or detached (dialects.PartitionMaintainer). Off,
// or on a dialect without partitions, it does nothing.
func (p *Poller) maintainPartitions(ctx context.Context) error {
	pc := p.config.Oncebox.Outbox.Partitions
	m, ok := p.config.Dialect.(dialects.PartitionMaintainer)
	if !pc.Enabled() || !ok {
		return nil
	}
	now := p.config.Clock.Now().UTC()
	st, err := m.MaintainPartitions(ctx, p.db, pc, now, now.Add(-p.config.Oncebox.Outbox.CleanUp.TTL))
	if st.Created > 0 || st.Removed > 0 {
		p.logger.Info("Partitions maintained", watermill.LogFields{"created": st.Created, "removed": st.Removed, "kept": st.Kept})
	}
	if ph, ok := p.config.Hooks.(PartitionHooks); ok {
		ph.PartitionsMaintained(st, err)
	}
	return err
}

// PartitionHooks is implemented by a Hooks value that wants to know what
// the partition maintenance did (outbox.partitions, PostgreSQL); the
// poller checks for it with a type assertion, so that Hooks keeps its
// methods.
type PartitionHooks interface {
	// PartitionsMaintained is called after each maintenance run (on the
	// instance holding the clean-up lease) with what it did, and its error
	// if it failed part way.
	PartitionsMaintained(st dialects.PartitionStats, err error)
}

// leasedCleanUp runs the clean-up job on the CleanUp schedule: rows older
// than cfg.TTL deleted cfg.BatchSize at a time by del, under the job's
// lease.
func (p *Poller) leasedCleanUp(ctx context.Context, job string, cfg oncebox.CleanUpConfig,
	del func(ctx context.Context, db wsql.Beginner, cutoff time.Time, limit int) (int64, error)) {
	p.runJob(ctx, job, p.config.CleanUp, nil, func(ctx context.Context) (int, bool, error) {
		return p.locker.CleanUp(ctx, job, p.config.CleanUpLease, p.config.CleanUp.Min, p.config.FinalizeTimeout,
			cfg.BatchSize, func(ctx context.Context) (int64, error) {
				return del(ctx, p.db, p.config.Clock.Now().UTC().Add(-cfg.TTL), cfg.BatchSize)
			})
	})
}

// dlqRetryLoop moves TO_RETRY rows of the DLQ table back to the outbox as
// PENDING events due now, with the same event id and no attempt counted,
// and wakes the poll loops (and the discovery) so that they send them at
// once. Each statement moves up to JobBatchSize rows atomically (dialect
// TransferDLQToOutbox) and locks them with SKIP LOCKED, so it is safe on
// every instance.
//
// A DLQ retry (dlq.Store) wakes the job: on PostgreSQL by a notification
// its transaction sends (dialects.DLQRetryWakePayload on the relay's
// LISTEN connection), in one process through package inprocess. Wake-ups
// are served through a waker of window dlqRetryWakeWindow, so a flood of
// them (any role that can connect may NOTIFY) costs at most one run per
// window after two empty ones. Where the job cannot hear the retries of
// other processes (dlqRetryHeard), its pace is capped at
// dlq.UnwokenPickupBound: a retry made anywhere is picked up within it.
func (p *Poller) dlqRetryLoop(ctx context.Context) {
	limit := p.config.JobBatchSize
	sched := p.dlqRetrySchedule()
	s := sched.Strategy()
	delay := s.Next(false) // Min, and the next idle run waits Min × Multiplier
	w := p.wakes.dlqRetry
	for {
		ok, woken := sleepOrWake(ctx, p.config.Clock, delay, w, nil)
		if !ok {
			return
		}
		start := p.config.Clock.Now()
		var r pacing.JobResult
		r.Err = p.withConn(ctx, func() error {
			var err error
			r.Rows, err = dbexec.Repeat(ctx, limit, func(ctx context.Context) (int, error) {
				return p.d.TransferDLQToOutbox(ctx, p.db, p.config.Clock.Now().UTC(), limit)
			})
			return err
		})
		if r.Rows > 0 {
			p.wakes.wakeLoops()
		}
		if woken {
			// Only this goroutine reads and writes the waker's run of
			// empty wake-driven runs (see waker).
			if r.Rows > 0 {
				w.empty = 0
			} else {
				w.empty++
			}
		}
		delay = s.Next(r.Rows > 0)
		p.jobDone(ctx, JobDLQRetry, r, p.config.Clock.Since(start), delay)
	}
}

// dlqRetryWakeWindow is the dlq-retry job's wake-up window (waker): after
// two wake-driven runs that moved nothing (another instance took the rows,
// or a flood of notifications), the next wake-up waits until a second has
// passed since the last one.
const dlqRetryWakeWindow = time.Second

// dlqRetryHeard reports whether the dlq-retry job hears the retries made
// in other processes: the dialect can notify (PostgreSQL) and the relay
// listens. The in-process hub (package inprocess) hears this process's
// only.
func (p *Poller) dlqRetryHeard() bool {
	if p.listener == nil || !p.config.Dialect.CanNotify() {
		return false
	}
	_, hub := p.listener.(*inprocess.Hub)
	return !hub
}

// dlqRetrySchedule is the dlq-retry job's pace: Config.DLQRetry, whose
// default Max (1h) is cut to dlq.UnwokenPickupBound (10s) when the job
// cannot hear the retries of other processes (dlqRetryHeard): a retry made
// by the CLI on MySQL, Oracle or SQLite, or on PostgreSQL to a relay that
// does not listen, then waits at most that long. A Max set in the Config is
// kept: the bound is then that Max.
func (p *Poller) dlqRetrySchedule() Schedule {
	s := p.config.DLQRetry
	if p.dlqRetryMaxSet || p.dlqRetryHeard() || s.Max <= dlq.UnwokenPickupBound {
		return s
	}
	s.Max = dlq.UnwokenPickupBound
	s.Min = min(s.Min, s.Max)
	return s
}

// dlqCleanUpLoop deletes RESOLVED DLQ rows older than
// outbox.dlq.clean-up.ttl, in batches, on one instance at a time: the lease
// "dlq-clean-up" in the jobs table. It runs on the CleanUp schedule.
func (p *Poller) dlqCleanUpLoop(ctx context.Context) {
	p.leasedCleanUp(ctx, JobDLQCleanUp, p.config.Oncebox.Outbox.DLQ.CleanUp, p.d.DeleteResolvedDLQ)
}
