package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// The console scenario: the operator's console's reads over a DLQ of
// 1,000,000 rows (scale 1): the dead letters list (first page, a filter, a
// deep keyset page), its count, and the fingerprint view. Each query's
// median of 5 runs, against a full count(*) of the table as the baseline,
// and its plan (EXPLAIN ANALYZE) printed to stderr and summarised in the
// row's note.

// lastQuery is a pgx.QueryTracer that keeps the last statement of the pool
// and its arguments, to EXPLAIN what a Store or dialect call ran.
type lastQuery struct {
	mu   sync.Mutex
	sql  string
	args []any
}

func (l *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !strings.HasPrefix(data.SQL, "EXPLAIN") {
		l.sql, l.args = data.SQL, data.Args
	}
	return ctx
}

func (l *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func runConsole(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(1_000_000, 10_000)
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	tr := &lastQuery{}
	pool, err := newPool(ctx, e.dsn, withTracer(tr))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	db := wsql.BeginnerFromPgx(pool)
	dlqTable := d.Tables().DLQ
	// n rows over 20 event types and 8 error texts that fall in 4 classes,
	// moved one a second apart, 1 in 10 RESOLVED, 1 in 3 from the consumer
	// side; ids rise with moved_at as the DLQ's UUIDv7s do.
	fill := `INSERT INTO ` + dlqTable + ` (id, event_id, source, handler_name, event_type, topic, message_uuid, payload,
       metadata, status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at)
SELECT id, id, CASE WHEN i % 3 = 0 THEN 'consumer' ELSE 'publisher' END, '', 'type-' || (i % 20), 'topic', id::text,
       '{"order": 1}'::bytea, '{}'::jsonb, CASE WHEN i % 10 = 0 THEN 'RESOLVED' ELSE 'MOVED' END, 3,
       CASE i % 8 WHEN 0 THEN 'dial tcp 10.0.' || (i % 256) || '.1:9092: i/o timeout'
                  WHEN 1 THEN 'dial tcp 10.1.' || (i % 256) || '.2:9092: i/o timeout'
                  WHEN 2 THEN 'order ' || i || ' not found'
                  WHEN 3 THEN 'order ' || (i * 7) || ' not found'
                  WHEN 4 THEN 'schema: field "customer_' || (i % 50) || '" missing'
                  WHEN 5 THEN 'schema: field "total_' || (i % 50) || '" missing'
                  ELSE 'handler: row ' || gen_random_uuid() || ' locked by ' || (i % 99) END,
       t, t, t, t, t
  FROM (SELECT i, $1::timestamptz + i * interval '1 second' AS t,
               (lpad(to_hex($2::bigint + i * 1000), 12, '0') || '7' || lpad(to_hex(i % 4096), 3, '0')
                || substr(replace(gen_random_uuid()::text, '-', ''), 17))::uuid AS id
          FROM generate_series(0, $3::bigint - 1) AS i) AS g`
	start := time.Now().UTC().Add(-time.Duration(n) * time.Second)
	if _, err := pool.Exec(ctx, fill, start, start.UnixMilli(), n); err != nil {
		return nil, fmt.Errorf("fill the DLQ with %d rows: %w", n, err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+dlqTable); err != nil {
		return nil, fmt.Errorf("analyze the DLQ: %w", err)
	}
	store, err := dlq.NewStore(db, dlq.Config{Dialect: d})
	if err != nil {
		return nil, err
	}
	// The largest fingerprint, for a fingerprint's act: pages of its ids.
	groups, err := d.ConsoleFingerprints(ctx, db, dialects.DLQFilter{}, 1)
	if err != nil || len(groups) == 0 {
		return nil, fmt.Errorf("the largest fingerprint: %d groups, %w", len(groups), err)
	}
	largest := groups[0]
	moved := []oncebox.DLQStatus{largest.Status}
	firstPage, err := d.ConsoleFingerprintIDs(ctx, db, largest.ConsoleGroup, moved, nil, dlq.MaxIDs)
	if err != nil || len(firstPage) == 0 {
		return nil, fmt.Errorf("the largest fingerprint's first page: %d ids, %w", len(firstPage), err)
	}
	// A cursor in the middle of the table, for a deep page.
	mid := dlq.Cursor{MovedAt: start.Add(time.Duration(n/2) * time.Second).Truncate(time.Microsecond)}
	cases := []struct {
		name string
		run  func() error
	}{
		{"count(*) of the whole table (baseline)", func() error {
			var c int
			return pool.QueryRow(ctx, "SELECT count(*) FROM "+dlqTable).Scan(&c)
		}},
		{"list: first page of 50, no filter", func() error {
			_, _, err := store.List(ctx, dlq.Filter{}, dlq.Page{})
			return err
		}},
		{"list: a page of 50 in the middle (keyset cursor)", func() error {
			_, _, err := store.List(ctx, dlq.Filter{}, dlq.Page{After: &mid})
			return err
		}},
		{"list: first page of 50, status MOVED, one event type", func() error {
			_, _, err := store.List(ctx, dlq.Filter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusMoved}, EventType: "type-7"}, dlq.Page{})
			return err
		}},
		{"list: the page's count, no filter", func() error {
			_, err := store.Count(ctx, dlq.Filter{})
			return err
		}},
		{"list: the page's count, one event type", func() error {
			_, err := store.Count(ctx, dlq.Filter{EventType: "type-7"})
			return err
		}},
		{"fingerprints: every row", func() error {
			_, err := d.ConsoleFingerprints(ctx, db, dialects.DLQFilter{}, 500)
			return err
		}},
		{"fingerprints: one event type", func() error {
			_, err := d.ConsoleFingerprints(ctx, db, dialects.DLQFilter{EventType: "type-7"}, 500)
			return err
		}},
		{"fingerprints: moved in the last hour", func() error {
			_, err := d.ConsoleFingerprints(ctx, db, dialects.DLQFilter{MovedFrom: time.Now().Add(-time.Hour)}, 500)
			return err
		}},
		{fmt.Sprintf("fingerprint act: first page of %d ids of the largest group (%s rows)", dlq.MaxIDs, thousands(int(largest.Count))), func() error {
			_, err := d.ConsoleFingerprintIDs(ctx, db, largest.ConsoleGroup, moved, nil, dlq.MaxIDs)
			return err
		}},
		{fmt.Sprintf("fingerprint act: the next page of %d ids (keyset)", dlq.MaxIDs), func() error {
			_, err := d.ConsoleFingerprintIDs(ctx, db, largest.ConsoleGroup, moved, &firstPage[len(firstPage)-1], dlq.MaxIDs)
			return err
		}},
	}
	var rows []row
	for i, c := range cases {
		var ms []float64
		for range 5 {
			t0 := time.Now()
			if err := c.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		}
		tr.mu.Lock()
		q, args := tr.sql, tr.args
		tr.mu.Unlock()
		plan, err := explain(ctx, pool, q, args)
		if err != nil {
			return nil, fmt.Errorf("%s: explain: %w", c.name, err)
		}
		fmt.Fprintf(os.Stderr, "console: %s (%s rows): median %.1f ms\n%s\n%s\n\n", c.name, thousands(n), median(ms), q, plan)
		rows = append(rows, row{Case: c.name, Value: median(ms), Unit: "ms", Baseline: i == 0, Note: planSummary(plan)})
	}
	return withRatios(rows), nil
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of q with args and returns the plan.
func explain(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, q string, args []any) (string, error) {
	rs, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	var lines []string
	for rs.Next() {
		var l string
		if err := rs.Scan(&l); err != nil {
			return "", err
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n"), rs.Err()
}

// planSummary is a plan's nodes, outermost first, without their figures:
// "Limit > Index Scan using …_moved_idx".
func planSummary(plan string) string {
	var nodes []string
	for _, l := range strings.Split(plan, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "->"))
		if l == "" || strings.HasPrefix(l, "Planning") || strings.HasPrefix(l, "Execution") || strings.HasPrefix(l, "Buffers") ||
			strings.Contains(l, ":") && !strings.Contains(l, "(cost") {
			continue
		}
		if i := strings.Index(l, "  (cost"); i >= 0 {
			l = l[:i]
		}
		nodes = append(nodes, l)
	}
	return strings.Join(nodes, " > ")
}
