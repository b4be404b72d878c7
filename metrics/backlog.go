package metrics

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/prometheus/client_golang/prometheus"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// DefaultBacklogTTL is how long the backlog collector serves the result of
// one refresh.
const DefaultBacklogTTL = 30 * time.Second

// DefaultBacklogQueryTimeout bounds one refresh.
const DefaultBacklogQueryTimeout = 10 * time.Second

// BacklogConfig configures a BacklogCollector.
type BacklogConfig struct {
	// TTL is how long the values of one refresh are served: the COUNT query
	// runs at most once per TTL however many scrapes arrive. Default 30s.
	TTL time.Duration
	// QueryTimeout bounds one refresh. Default 10s.
	QueryTimeout time.Duration
	// Clock decides when the cache expires and the age of the oldest
	// PENDING event. Nil means the real clock; tests pass a fake one (see
	// oncebox.Clock).
	Clock oncebox.Clock
}

// BacklogCollector is a prometheus.Collector of the outbox and DLQ backlog:
// row counts by status and the age of the oldest PENDING event. A scrape
// reads a cache refreshed by one grouped COUNT query at most once per TTL;
// concurrent scrapes of an expired cache wait for a single refresh. A failed
// refresh keeps the last values and counts
// oncebox_backlog_refresh_errors_total.
type BacklogCollector struct {
	db     wsql.ContextExecutor
	d      dialects.Inspector
	config BacklogConfig

	outboxDesc *prometheus.Desc
	oldestDesc *prometheus.Desc
	dlqDesc    *prometheus.Desc
	lastOKDesc *prometheus.Desc
	errors     prometheus.Counter

	cache cached[*snapshot]
}

// snapshot is the result of one successful refresh.
type snapshot struct {
	at     time.Time
	outbox []backlogRow
	dlq    []backlogRow
}

// backlogRow is one group of the backlog query.
type backlogRow struct {
	label, status string // event type or DLQ source, and status
	count         float64
	oldest        stdsql.NullTime // min(next_retry_at) of the group: when its oldest due row came due
}

var _ prometheus.Collector = (*BacklogCollector)(nil)

// Validate checks c as NewBacklogCollector does; the error names every
// field at fault and wraps oncebox.ErrInvalidConfig.
func (c BacklogConfig) Validate() error {
	if err := errors.Join(c.problems()...); err != nil {
		return fmt.Errorf("%w: backlog collector: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

func (c BacklogConfig) problems() []error {
	var errs []error
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("BacklogConfig.TTL must not be negative (0: the default %s), got %s", DefaultBacklogTTL, c.TTL))
	}
	if c.QueryTimeout < 0 {
		errs = append(errs, fmt.Errorf("BacklogConfig.QueryTimeout must not be negative (0: the default %s), got %s", DefaultBacklogQueryTimeout, c.QueryTimeout))
	}
	return errs
}

// NewBacklogCollector returns a collector over db (a pool: each refresh is
// one statement) for the tables of d. Register it with a
// prometheus.Registerer; it runs no query until the first scrape.
func NewBacklogCollector(db wsql.ContextExecutor, d dialects.Dialect, cfg BacklogConfig) (*BacklogCollector, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	}
	if d == nil {
		errs = append(errs, errors.New("dialect is nil"))
	}
	errs = append(errs, cfg.problems()...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: backlog collector: %w", oncebox.ErrInvalidConfig, err)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultBacklogTTL
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultBacklogQueryTimeout
	}
	return &BacklogCollector{
		db:     db,
		d:      d,
		config: cfg,
		outboxDesc: prometheus.NewDesc(NameOutboxEvents,
			"Rows of the outbox table by event type and status (cached, see oncebox_backlog_last_refresh_success_timestamp_seconds).",
			[]string{"event_type", "status"}, nil),
		oldestDesc: prometheus.NewDesc(NameOutboxOldestPendingAge,
			"Age of the oldest due PENDING event of an event type: now minus the time it came due (its created_at, or the end of its delay or retry wait); 0 while every PENDING row waits (cached; no series when none is PENDING).",
			[]string{"event_type"}, nil),
		dlqDesc: prometheus.NewDesc(NameDLQEvents,
			"Rows of the DLQ table by status and source (publisher or consumer) (cached).",
			[]string{"status", "source"}, nil),
		lastOKDesc: prometheus.NewDesc(NameBacklogLastRefreshSuccess,
			"Unix time of the last successful refresh of the backlog gauges.", nil, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: NameBacklogRefreshErrors,
			Help: "Failed refreshes of the backlog gauges; the last values are kept."}),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.outboxDesc
	ch <- c.oldestDesc
	ch <- c.dlqDesc
	ch <- c.lastOKDesc
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it refreshes the cache if it is
// older than the TTL, then reports the cached values.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.current()
	c.errors.Collect(ch)
	if snap == nil {
		return
	}
	for _, r := range snap.outbox {
		ch <- prometheus.MustNewConstMetric(c.outboxDesc, prometheus.GaugeValue, r.count, r.label, r.status)
		if r.status == string(oncebox.StatusPending) && r.oldest.Valid {
			age := max(c.now().Sub(r.oldest.Time).Seconds(), 0)
			ch <- prometheus.MustNewConstMetric(c.oldestDesc, prometheus.GaugeValue, age, r.label)
		}
	}
	for _, r := range snap.dlq {
		ch <- prometheus.MustNewConstMetric(c.dlqDesc, prometheus.GaugeValue, r.count, r.status, r.label)
	}
	ch <- prometheus.MustNewConstMetric(c.lastOKDesc, prometheus.GaugeValue, float64(snap.at.UnixNano())/1e9)
}

// now returns the time on the configured clock (the real one when nil).
func (c *BacklogCollector) now() time.Time {
	if c.config.Clock == nil {
		return time.Now()
	}
	return c.config.Clock.Now()
}

// current returns the cached snapshot, refreshing it first when the last
// attempt is older than the TTL. The mutex is held across the query, so that
// concurrent scrapes of an expired cache run one query and share its result.
func (c *BacklogCollector) current() *snapshot {
	now := c.now()
	return c.cache.get(now, c.config.TTL, c.errors, func() (*snapshot, error) { return c.load(now) })
}

// load runs the backlog query.
func (c *BacklogCollector) load(now time.Time) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.config.QueryTimeout)
	defer cancel()
	groups, err := c.d.Backlog(ctx, c.db)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{at: now}
	for _, g := range groups {
		r := backlogRow{label: g.Key, status: g.Status, count: float64(g.Count), oldest: g.Oldest}
		if g.Table == dialects.BacklogDLQ {
			snap.dlq = append(snap.dlq, r)
		} else {
			snap.outbox = append(snap.outbox, r)
		}
	}
	return snap, nil
}
