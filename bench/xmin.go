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
// It needs autovacuum on (run it with -own-cluster): with autovacuum off
// nothing removes dead tuples in either phase and the two phases are the
// same. On such a server it returns one row saying so. Partitions (issue
// 28, item 4) are not built, so there is no partitioned phase.
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
	for _, held := range []bool{false, true} {
		samples, err := xminPhase(ctx, e, held, phase, interval, rate)
		if err != nil {
			return nil, err
		}
		name := "no held transaction"
		if held {
			name = "a transaction held open (REPEATABLE READ, txid_current())"
		}
		for i, s := range samples {
			rows = append(rows, row{
				Case:     fmt.Sprintf("%s, t=%ds", name, int(s.at.Seconds())),
				Value:    ms(s.p50),
				Unit:     "ms (claim p50)",
				Baseline: !held && i == len(samples)-1,
				Note: fmt.Sprintf("claim p95 %.2f ms, max %.1f ms; %d claims, %.0f events/s relayed; dead tuples %d, live %d; autovacuums %d; table %.1f MB, indexes %.1f MB; oldest xmin age %d xids",
					ms(s.p95), ms(s.max), s.claims, float64(s.relayed)/interval.Seconds(), s.dead, s.live, s.autovacuums, s.tableMB, s.indexesMB, s.xminAge),
			})
		}
	}
	return withRatios(rows), nil
}

// xminPhase runs one phase and returns its samples.
func xminPhase(ctx context.Context, e *env, held bool, phase, interval time.Duration, rate int) ([]xminSample, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	events := d.Tables().Events
	// What an operator of a queue table is advised to set (docs/postgresql.md):
	// vacuum after 1,000 dead tuples plus 2% of the table rather than 20%.
	if _, err := e.pool.Exec(ctx, "ALTER TABLE "+events+
		" SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000)"); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "bench: xmin: phase held=%v, %s, %d events/s, sampled every %s\n", held, phase, rate, interval)

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

	if held {
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
		s := xminSample{at: time.Since(start).Round(time.Second), claims: len(ds), relayed: n}
		if len(ds) > 0 {
			slices.Sort(ds)
			s.p50, s.p95, s.max = percentile(ds, 0.50), percentile(ds, 0.95), ds[len(ds)-1]
		}
		if err := e.pool.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count,
       pg_table_size(relid) / 1048576.0, pg_indexes_size(relid) / 1048576.0,
       (SELECT coalesce(max(age(backend_xmin)), 0) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL)
  FROM pg_stat_user_tables WHERE relid = $1::regclass`, events).
			Scan(&s.live, &s.dead, &s.autovacuums, &s.tableMB, &s.indexesMB, &s.xminAge); err != nil {
			fail(fmt.Errorf("xmin: sample: %w", err))
			break
		}
		fmt.Fprintf(stderr, "bench: xmin: held=%v t=%s claims %d p50 %.2f ms p95 %.2f ms; dead %d live %d autovacuums %d table %.1f MB indexes %.1f MB xmin age %d\n",
			held, s.at, s.claims, ms(s.p50), ms(s.p95), s.dead, s.live, s.autovacuums, s.tableMB, s.indexesMB, s.xminAge)
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
