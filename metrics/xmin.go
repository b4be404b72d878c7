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
)

// DefaultXminTTL is how long the xmin collector serves the result of one
// refresh.
const DefaultXminTTL = 15 * time.Second

// The holders of an xmin horizon the xmin collector reports, its label
// holder's values.
const (
	XminHolderBackend         = "backend"
	XminHolderPreparedXact    = "prepared_xact"
	XminHolderReplicationSlot = "replication_slot"
)

// xminHoldersSQL reads the oldest holder of each kind in one statement of
// three small scans of system views (no table of the application is read,
// no lock taken): sessions with a snapshot or an xid (pg_stat_activity; this
// statement's own session excluded, its snapshot is the only one it holds),
// prepared transactions (pg_prepared_xacts) and replication slots
// (pg_replication_slots, whose xmin and catalog_xmin carry no time). Ages in
// transactions are age(xid): how far the horizon lags the next xid, which is
// what keeps VACUUM from removing dead row versions and what wraparound is
// counted in. Every database of the server is included: a holder in another
// database holds back the shared catalogs only, but a replication slot or a
// prepared transaction holds back every database.
//
// The session's role needs pg_read_all_stats (pg_monitor) to see other
// roles' sessions' backend_xmin.
const xminHoldersSQL = `SELECT 'backend', max(greatest(age(backend_xmin), age(backend_xid))),
       max(extract(epoch FROM now() - xact_start))::float8
  FROM pg_stat_activity
 WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid()
UNION ALL
SELECT 'prepared_xact', max(age(transaction)), max(extract(epoch FROM now() - prepared))::float8
  FROM pg_prepared_xacts
UNION ALL
SELECT 'replication_slot', max(greatest(age(xmin), age(catalog_xmin))), NULL::float8
  FROM pg_replication_slots`

// XminConfig configures an XminCollector.
type XminConfig struct {
	// TTL is how long the values of one refresh are served: the statement
	// runs at most once per TTL however many scrapes arrive. Default 15s.
	TTL time.Duration
	// QueryTimeout bounds one refresh. Default 10s.
	QueryTimeout time.Duration
	// Clock decides when the cache expires. Nil means the real clock.
	Clock oncebox.Clock
}

func (c XminConfig) problems() []error {
	var errs []error
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("XminConfig.TTL must not be negative (0: the default %s), got %s", DefaultXminTTL, c.TTL))
	}
	if c.QueryTimeout < 0 {
		errs = append(errs, fmt.Errorf("XminConfig.QueryTimeout must not be negative (0: the default %s), got %s", DefaultBacklogQueryTimeout, c.QueryTimeout))
	}
	return errs
}

// Validate checks c as NewXminCollector does; the error names every field
// at fault and wraps oncebox.ErrInvalidConfig.
func (c XminConfig) Validate() error {
	if err := errors.Join(c.problems()...); err != nil {
		return fmt.Errorf("%w: xmin collector: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// XminCollector is a prometheus.Collector of the oldest holder of the xmin
// horizon on a PostgreSQL server, by kind: a session with a transaction (or
// a snapshot) open, a prepared transaction, a replication slot. While one is
// held, VACUUM (and autovacuum) removes no row version deleted after it
// started: the outbox's dead tuples and its claim's cost grow
// (docs/postgresql.md, "A held xmin horizon"). A scrape reads a cache
// refreshed by one statement at most once per TTL; concurrent scrapes of an
// expired cache wait for a single refresh. A failed refresh keeps the last
// values and counts oncebox_postgres_xmin_refresh_errors_total.
// PostgreSQL only.
type XminCollector struct {
	db     wsql.ContextExecutor
	config XminConfig

	secondsDesc *prometheus.Desc
	xidsDesc    *prometheus.Desc
	errors      prometheus.Counter

	cache cached[[]xminHolder]
}

// xminHolder is one row of xminHoldersSQL.
type xminHolder struct {
	holder  string
	xids    stdsql.NullInt64
	seconds stdsql.NullFloat64
}

var _ prometheus.Collector = (*XminCollector)(nil)

// NewXminCollector returns a collector over db (a pool of a PostgreSQL
// server: each refresh is one statement). Register it with a
// prometheus.Registerer; it runs no query until the first scrape.
func NewXminCollector(db wsql.ContextExecutor, cfg XminConfig) (*XminCollector, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	}
	errs = append(errs, cfg.problems()...)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: xmin collector: %w", oncebox.ErrInvalidConfig, err)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultXminTTL
	}
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultBacklogQueryTimeout
	}
	return &XminCollector{
		db:     db,
		config: cfg,
		secondsDesc: prometheus.NewDesc(NamePostgresOldestXminAge,
			"Seconds since the oldest transaction holding the xmin horizon started, by holder (backend: xact_start; prepared_xact: prepared); 0 when none holds it (cached). Replication slots carry no time: see "+NamePostgresOldestXminAgeXids+".",
			[]string{"holder"}, nil),
		xidsDesc: prometheus.NewDesc(NamePostgresOldestXminAgeXids,
			"age() of the oldest xmin (or xid) held, in transactions, by holder (backend, prepared_xact, replication_slot); 0 when none holds it (cached).",
			[]string{"holder"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: NamePostgresXminRefreshErrors,
			Help: "Failed refreshes of the xmin gauges; the last values are kept."}),
	}, nil
}

// Describe implements prometheus.Collector.
func (c *XminCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.secondsDesc
	ch <- c.xidsDesc
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector: it refreshes the cache if it is
// older than the TTL, then reports the cached values.
func (c *XminCollector) Collect(ch chan<- prometheus.Metric) {
	holders := c.current()
	c.errors.Collect(ch)
	for _, h := range holders {
		ch <- prometheus.MustNewConstMetric(c.xidsDesc, prometheus.GaugeValue, float64(h.xids.Int64), h.holder)
		if h.holder != XminHolderReplicationSlot {
			ch <- prometheus.MustNewConstMetric(c.secondsDesc, prometheus.GaugeValue, max(h.seconds.Float64, 0), h.holder)
		}
	}
}

func (c *XminCollector) now() time.Time {
	if c.config.Clock == nil {
		return time.Now()
	}
	return c.config.Clock.Now()
}

// current returns the cached holders, refreshing them first when the last
// attempt is older than the TTL; the mutex is held across the query so that
// concurrent scrapes share one.
func (c *XminCollector) current() []xminHolder {
	return c.cache.get(c.now(), c.config.TTL, c.errors, c.load)
}

func (c *XminCollector) load() ([]xminHolder, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.config.QueryTimeout)
	defer cancel()
	rows, err := c.db.QueryContext(ctx, xminHoldersSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []xminHolder
	for rows.Next() {
		var h xminHolder
		if err := rows.Scan(&h.holder, &h.xids, &h.seconds); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	// wsql.Rows has no Err: an error that ended the rows early shows as
	// fewer than the statement's three rows (database/sql's and pgx's
	// adapters have an Err, read when there).
	if e, ok := rows.(interface{ Err() error }); ok && e.Err() != nil {
		return nil, e.Err()
	}
	if len(out) != 3 {
		return nil, fmt.Errorf("xmin holders: got %d rows of 3", len(out))
	}
	return out, nil
}
