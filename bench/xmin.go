package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// xminSample is one interval of an xmin phase.
type xminSample struct {
	at                 time.Duration // since the phase started
	claims             int           // claim statements in the interval
	relayed            int           // events claimed and marked in the interval
	p50, p95, max      time.Duration // of the claim statements
	live, dead         int64         // pg_stat_user_tables n_live_tup, n_dead_tup
	autovacuums        int64         // pg_stat_user_tables autovacuum_count
	tableMB, indexesMB float64       // pg_table_size, pg_indexes_size
	xminAge            int64         // age(backend_xmin) of the oldest holder, in transactions
	partitions         int           // leaf partitions of the outbox (0: a plain table)
	dropped            int           // partitions the retention dropped in the interval
}

// xminPartitions is the partitioned phases' layout: the shortest interval
// the setting allows, so that the retention drops a partition every minute
// within a few minutes' phase, and a clean-up ttl of 15 s.
var xminPartitions = oncebox.PartitionsConfig{Interval: time.Minute, Ahead: 3, Retention: oncebox.PartitionRetentionDrop}

const xminPartitionsTTL = 15 * time.Second

// xminPhaseKind is one of the scenario's phases.
type xminPhaseKind struct {
	held, partitioned bool
}

func (k xminPhaseKind) String() string {
	s := "no held transaction"
	if k.held {
		s = "a transaction held open (REPEATABLE READ, txid_current())"
	}
	if k.partitioned {
		s += ", partitioned by the minute (retention: drop, ttl 15s)"
	}
	return s
}

// runXmin measures what a transaction held open does to the relay (issue
// 28, item 5): producers write at a steady rate, a relay loop claims (the
// PostgreSQL dialect's Claim, timed) and marks PROCESSED, and every interval
// the claim's median and 95th percentile, the table's dead and live tuples,
// its autovacuum count and the table's and its indexes' size are sampled.
// Two phases on a fresh schema each: without a held transaction (the
// baseline), and with a session that holds a REPEATABLE READ transaction
// with an xid assigned (txid_current()) for the whole phase, so that no
// vacuum can remove a row version deleted after it started.
//
// Then the same two phases on an outbox partitioned by the minute
// (outbox.partitions, interval 1m, retention drop), whose retention the
// relay loop's side runs every interval as the clean-up job would, with a
// ttl of 15 s: a partition whose rows are all PROCESSED is dropped a minute
// and 15 s after it began, and its dead tuples go with its files, held
// horizon or not. The plain phases run no clean-up (its deletes would only
// add dead tuples under a held horizon).
//
// It needs autovacuum on (run it with -own-cluster): with autovacuum off
// nothing removes dead tuples in either phase and the two phases are the
// same. On such a server it returns one row saying so.
func runXmin(ctx context.Context, e *env) ([]row, error) {
	if av := e.autovacuum(ctx); av != "on" {
		msg := "skipped: autovacuum is " + av + " on this server, so nothing removes dead tuples with or without a held transaction and the comparison says nothing; run with -own-cluster (a throw-away cluster with autovacuum on)"
		fmt.Fprintln(stderr, "bench: xmin:", msg)
		return []row{{Case: "xmin", Unit: "", Note: msg}}, nil
	}
	defer e.dropSchema()
	phase := time.Duration(float64(3*time.Minute) * e.scale)
	phase = max(phase, time.Minute)
	interval := 15 * time.Second
	rate := e.n(500, 100) // events per second
	var rows []row
	for _, k := range []xminPhaseKind{{}, {held: true}, {partitioned: true}, {held: true, partitioned: true}} {
		samples, err := xminPhase(ctx, e, k, phase, interval, rate)
		if err != nil {
			return nil, err
		}
		for i, s := range samples {
			note := fmt.Sprintf("claim p95 %.2f ms, max %.1f ms; %d claims, %.0f events/s relayed; dead tuples %d, live %d; autovacuums %d; table %.1f MB, indexes %.1f MB; oldest xmin age %d xids",
				ms(s.p95), ms(s.max), s.claims, float64(s.relayed)/interval.Seconds(), s.dead, s.live, s.autovacuums, s.tableMB, s.indexesMB, s.xminAge)
			if k.partitioned {
				note += fmt.Sprintf("; %d partitions, %d dropped in the interval", s.partitions, s.dropped)
			}
			rows = append(rows, row{
				Case:     fmt.Sprintf("%s, t=%ds", k, int(s.at.Seconds())),
				Value:    ms(s.p50),
				Unit:     "ms (claim p50)",
				Baseline: k == xminPhaseKind{} && i == len(samples)-1,
				Note:     note,
			})
		}
	}
	return withRatios(rows), nil
}

// xminPhase runs one phase and returns its samples.
func xminPhase(ctx context.Context, e *env, k xminPhaseKind, phase, interval time.Duration, rate int) ([]xminSample, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	db := wsql.BeginnerFromPgx(e.pool)
	events := d.Tables().Events
	// maintain runs the partitions' retention and creation as the clean-up
	// job does; a no-op on a plain table.
	maintain := func(ctx context.Context) (int, error) { return 0, nil }
	if k.partitioned {
		d = d.WithPartitions(xminPartitions)
		if err := migrate.Migrate(ctx, db, d); err != nil {
			return nil, fmt.Errorf("xmin: partition the outbox: %w", err)
		}
		maintain = func(ctx context.Context) (int, error) {
			now := time.Now().UTC()
			st, err := d.MaintainPartitions(ctx, db, xminPartitions, now, now.Add(-xminPartitionsTTL))
			if err != nil {
				return 0, fmt.Errorf("xmin: maintain partitions: %w", err)
			}
			return st.Removed, xminVacuumSettings(ctx, e, events)
		}
		if _, err := maintain(ctx); err != nil {
			return nil, err
		}
	} else if err := xminVacuumSettings(ctx, e, events); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: xmin: phase %s, %s, %d events/s, sampled every %s\n", k, phase, rate, interval)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	fail := func(err error) {
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			errs <- err
			cancel()
		}
	}

	if k.held {
		conn, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			return nil, fmt.Errorf("xmin: the holder's connection: %w", err)
		}
		defer conn.Close(context.Background())
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return nil, err
		}
		// Rolled back when the phase ends (deferred before conn.Close).
		defer func() { _ = tx.Rollback(context.Background()) }()
		var xid int64
		if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
			return nil, fmt.Errorf("xmin: the holder's xid: %w", err)
		}
		fmt.Fprintf(stderr, "bench: xmin: holding xid %d open\n", xid)
	}

	// The producer: rate events a second, in ten inserts a second.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		per := max(rate/10, 1)
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := newEventRows(per, relayEventType, time.Now().UTC().Add(-time.Millisecond))
			if err == nil {
				err = d.InsertEvents(ctx, wsql.BeginnerFromPgx(e.pool), rows)
			}
			if err != nil {
				fail(fmt.Errorf("xmin: produce: %w", err))
				return
			}
		}
	}()

	// The relay: the dialect's Claim (timed) and MarkProcessed, batch
	// 1000, a 20 ms pause when a claim comes back empty.
	var mu sync.Mutex
	var took []time.Duration
	relayed := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		db := wsql.BeginnerFromPgx(e.pool)
		for ctx.Err() == nil {
			n, dur, err := timedClaimAndMark(ctx, db, d, 1000)
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			took = append(took, dur)
			relayed += n
			mu.Unlock()
			if n == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()

	var samples []xminSample
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for time.Since(start) < phase-time.Second {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		ds, n := took, relayed
		took, relayed = nil, 0
		mu.Unlock()
		dropped, err := maintain(ctx)
		if err != nil {
			fail(err)
			break
		}
		s := xminSample{at: time.Since(start).Round(time.Second), claims: len(ds), relayed: n, dropped: dropped}
		if len(ds) > 0 {
			slices.Sort(ds)
			s.p50, s.p95, s.max = percentile(ds, 0.50), percentile(ds, 0.95), ds[len(ds)-1]
		}
		// The outbox's own figures, or the sum of its partitions' (a
		// dropped partition's autovacuums leave the sum with it).
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint,
       coalesce(sum(s.autovacuum_count), 0)::bigint,
       coalesce(sum(pg_table_size(t.relid)), 0) / 1048576.0, coalesce(sum(pg_indexes_size(t.relid)), 0) / 1048576.0,
       (SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL),
       count(*) FILTER (WHERE t.relid <> $1::regclass)
  FROM (SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf UNION SELECT $1::regclass) AS t
  LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid`, events).
			Scan(&s.live, &s.dead, &s.autovacuums, &s.tableMB, &s.indexesMB, &s.xminAge, &s.partitions); err != nil {
			fail(fmt.Errorf("xmin: sample: %w", err))
			break
		}
		fmt.Fprintf(stderr, "bench: xmin: held=%v partitioned=%v t=%s claims %d p50 %.2f ms p95 %.2f ms; dead %d live %d autovacuums %d table %.1f MB indexes %.1f MB xmin age %d; partitions %d, dropped %d\n",
			k.held, k.partitioned, s.at, s.claims, ms(s.p50), ms(s.p95), s.dead, s.live, s.autovacuums, s.tableMB, s.indexesMB, s.xminAge, s.partitions, s.dropped)
		samples = append(samples, s)
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if err := context.Cause(ctx); err != nil && len(samples) == 0 {
		return nil, err
	}
	return samples, nil
}

// xminVacuumSettings sets what an operator of a queue table is advised to
// set (docs/postgresql.md), vacuum after 1,000 dead tuples plus 2% of the
// table rather than 20%, on the outbox or, partitioned, on each of its
// partitions (PostgreSQL refuses storage parameters on a partitioned table,
// and a new partition does not inherit them). Only the tables that lack them:
// the ALTER's lock would cancel an autovacuum of the table under way.
func xminVacuumSettings(ctx context.Context, e *env, events string) error {
	rows, err := e.pool.Query(ctx, `SELECT c.oid::regclass::text
  FROM (SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf UNION SELECT $1::regclass) AS t
  JOIN pg_class c ON c.oid = t.relid
 WHERE c.relkind = 'r' AND NOT coalesce(c.reloptions @> ARRAY['autovacuum_vacuum_threshold=1000'], false)`, events)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := e.pool.Exec(ctx, "ALTER TABLE "+t+
			" SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000)"); err != nil {
			return fmt.Errorf("xmin: vacuum settings of %s: %w", t, err)
		}
	}
	return nil
}

// timedClaimAndMark claims up to limit due events through the dialect's
// Claim, timing it, and marks them PROCESSED.
func timedClaimAndMark(ctx context.Context, db wsql.Beginner, d *postgres.Dialect, limit int) (int, time.Duration, error) {
	token, err := oncebox.NewEventID()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	claimed, err := d.Claim(ctx, db, dialects.ClaimParams{EventType: relayEventType, Limit: limit, Token: token,
		Now: time.Now().UTC()})
	took := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("xmin: claim: %w", err)
	}
	if len(claimed) == 0 {
		return 0, took, nil
	}
	ids := make([]oncebox.EventID, len(claimed))
	for i := range claimed {
		ids[i] = claimed[i].ID
	}
	if _, err := d.MarkProcessed(ctx, db, token, ids, time.Now().UTC()); err != nil {
		return 0, 0, fmt.Errorf("xmin: mark processed: %w", err)
	}
	return len(ids), took, nil
}
