package middleware

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/lease"
	"github.com/oncebox/watermill-oncebox/internal/lifecycle"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// JobInboxCleanUp is the inbox clean-up's name in the jobs table.
const JobInboxCleanUp = "inbox-clean-up"

// Schedule is the adaptive pace of a background job: after a run that found
// work it waits Min, otherwise its delay grows by Multiplier up to Max.
type Schedule = pacing.Schedule

// JobResult is the outcome of one clean-up run.
type JobResult = pacing.JobResult

// InboxCleanerConfig configures an InboxCleaner.
type InboxCleanerConfig struct {
	// Dialect deletes the ids (its Inbox role) and takes the job's lease.
	// Required.
	Dialect dialects.Dialect
	// CleanUp is inbox.clean-up of the configuration: ids older than TTL (default
	// 24h) are deleted, BatchSize (default 1000) per statement. The ttl must
	// outlast the longest time a duplicate can still arrive (broker
	// retention, consumer-group replays).
	CleanUp oncebox.CleanUpConfig
	// Schedule paces the runs. Default: min 5m, max 1h, ×2.
	Schedule Schedule
	// Lease is the longest one run holds the job's lease (at-most). Default
	// 10m. The lease is kept at least Schedule.Min after a run (at-least).
	Lease time.Duration
	// InstanceID names this instance in the lease. Default:
	// hostname-pid-random.
	InstanceID string
	// Clock drives the schedule and the cut-off. Nil means the real clock;
	// tests pass a fake one (see oncebox.Clock).
	Clock oncebox.Clock
	// OnRun, if set, is called after every run.
	OnRun func(JobResult)
}

// InboxCleaner deletes processed ids older than the inbox ttl, in batches,
// on one instance at a time (the lease "inbox-clean-up" in the jobs table).
// Its lifecycle is the poller's and the service's (docs/design.md,
// "Lifecycle"): Run, Running, Close.
type InboxCleaner struct {
	db     wsql.Beginner
	config InboxCleanerConfig
	logger watermill.LoggerAdapter
	locker *lease.Locker
	life   *lifecycle.Lifecycle
}

// withDefaults returns c with its zero fields set to their defaults.
func (c InboxCleanerConfig) withDefaults() InboxCleanerConfig {
	if c.CleanUp.TTL == 0 {
		c.CleanUp.TTL = oncebox.DefaultInboxTTL
	}
	if c.CleanUp.BatchSize == 0 {
		c.CleanUp.BatchSize = oncebox.DefaultCleanUpBatchSize
	}
	c.Schedule = c.Schedule.WithDefaults(Schedule{Min: 5 * time.Minute, Max: time.Hour, Multiplier: 2})
	if c.Lease == 0 {
		c.Lease = 10 * time.Minute
	}
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		id, _ := oncebox.NewEventID() // fails only if crypto/rand does, which Go treats as fatal
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), id.String()[24:])
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// problems lists what is wrong with c, its defaults filled, one error per
// field.
func (c InboxCleanerConfig) problems() []error {
	var errs []error
	if c.Dialect == nil {
		errs = append(errs, errors.New("InboxCleanerConfig.Dialect is nil"))
	}
	if c.CleanUp.TTL < 0 {
		errs = append(errs, fmt.Errorf("inbox.clean-up.ttl must be > 0, got %s", c.CleanUp.TTL))
	}
	if c.CleanUp.BatchSize < 0 || c.CleanUp.BatchSize > oncebox.MaxBatchSize {
		errs = append(errs, fmt.Errorf("inbox.clean-up.batch-size must be between 1 and %d, got %d", oncebox.MaxBatchSize, c.CleanUp.BatchSize))
	}
	errs = append(errs, c.Schedule.Validate("InboxCleanerConfig.Schedule"))
	if c.Lease < 0 {
		errs = append(errs, fmt.Errorf("InboxCleanerConfig.Lease must be > 0, got %s", c.Lease))
	}
	return errs
}

// Validate checks c as NewInboxCleaner does, zero fields taking their
// defaults; the error names every field at fault and wraps
// oncebox.ErrInvalidConfig.
func (c InboxCleanerConfig) Validate() error {
	if err := errors.Join(c.withDefaults().problems()...); err != nil {
		return fmt.Errorf("%w: inbox cleaner: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// NewInboxCleaner returns an InboxCleaner over db, a pool. config is
// completed with its defaults and validated; the error names every
// argument and field at fault and wraps oncebox.ErrInvalidConfig.
func NewInboxCleaner(db wsql.Beginner, config InboxCleanerConfig, logger watermill.LoggerAdapter) (*InboxCleaner, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	}
	config = config.withDefaults()
	if err := errors.Join(append(errs, config.problems()...)...); err != nil {
		return nil, fmt.Errorf("%w: inbox cleaner: %w", oncebox.ErrInvalidConfig, err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &InboxCleaner{
		db:     db,
		config: config,
		logger: logger.With(watermill.LogFields{"component": "oncebox-inbox-cleaner", "instance": config.InstanceID}),
		locker: lease.NewLocker(db, config.Dialect, config.InstanceID, config.Clock),
		life:   lifecycle.New("inbox cleaner"),
	}, nil
}

// Running is closed once Run has started, or has returned, or Close was
// called before Run: `go c.Run(ctx); <-c.Running()` never hangs.
func (c *InboxCleaner) Running() chan struct{} { return c.life.Running() }

// Run cleans on the schedule until ctx ends or Close is called, then returns
// nil. Run after Close, or with ctx already done, returns nil at once
// without cleaning; Close before Run closes Running; a second Run returns
// an error; Close may be called any number of times, from any goroutine,
// and waits for Run to return (the lifecycle of every long-running type:
// docs/design.md, "Lifecycle").
func (c *InboxCleaner) Run(ctx context.Context) error {
	return c.life.Run(ctx, c.run)
}

// run is Run's work; markRunning closes Running.
func (c *InboxCleaner) run(ctx context.Context, markRunning func()) error {
	markRunning()
	cfg := c.config.CleanUp
	pacing.RunJob(ctx, c.config.Clock, c.config.Schedule, nil, func(ctx context.Context) JobResult {
		n, skipped, err := c.locker.CleanUp(ctx, JobInboxCleanUp, c.config.Lease, c.config.Schedule.Min, 10*time.Second,
			cfg.BatchSize, func(ctx context.Context) (int64, error) {
				return c.config.Dialect.InboxDeleteBefore(ctx, c.db, c.config.Clock.Now().UTC().Add(-cfg.TTL), cfg.BatchSize)
			})
		return JobResult{Rows: n, Skipped: skipped, Err: err}
	}, func(r JobResult, _, next time.Duration) {
		if r.Err != nil && ctx.Err() == nil {
			c.logger.Error("Inbox clean-up failed", r.Err, watermill.LogFields{"next_delay": next})
		}
		if r.Rows > 0 {
			c.logger.Info("Inbox clean-up done", watermill.LogFields{"rows": r.Rows})
		}
		if c.config.OnRun != nil {
			c.config.OnRun(r)
		}
	})
	return nil
}

// Close stops the cleaner and waits for Run to return. It is safe to call
// more than once, from any goroutine, and before Run. It returns nil.
func (c *InboxCleaner) Close() error {
	c.life.Close()
	return nil
}
