package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// backlogDeadline bounds each of the backlog scenario's poller drains, the
// fill included: ten times relayDeadline, for ten times the rows.
const backlogDeadline = 10 * relayDeadline

// runBacklog measures whether a relay keeps its speed as the backlog grows:
// the oncebox poller drains a 1,000,000-row backlog and a 100,000-row one,
// tuned and with its defaults (the relay scenario's cases), and the ratio of
// the two rates is the figure; its claim walks the due index, so it should
// hold about flat, and the raw claim-and-mark loop, drained the same way,
// says how much of the loss is the database's own. Watermill's forwarder (defaults) drains 100,000 rows, then
// 300,000 within forwarderDeadline: each of its polls sorts the whole
// backlog, so it falls behind as the backlog grows, and what it delivered in
// the deadline is the figure. Beside each poller drain, the bench process's
// memory: resident set (VmRSS) and Go heap in use before the drain and at
// their peak during it.
//
// The poller's backlogs are written by fillBacklog, one INSERT … SELECT, and
// analyzed before the clock starts; the forwarder's by its own publisher.
func runBacklog(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	small, large := e.n(100_000, 1_000), e.n(1_000_000, 10_000)
	mem := &memSampler{}
	r := e.pgRelayDB()
	r.clock = mem.clock
	r.fill = func(ctx context.Context, d dialects.Dialect, n int) error {
		return fillBacklog(ctx, e.pool, d.(*postgres.Dialect), relayEventType, n)
	}

	// The raw loop is the reference: the same claim and mark statements
	// with nothing around them, so its ratio is what the database alone
	// loses as the backlog grows, and the pollers' ratios are read against
	// it. What it loses: the due index keeps an entry for every row claimed
	// until a vacuum removes it, and each claim's scan walks past them
	// (EXPLAIN ANALYZE of a 200-row claim on a 400,000-row backlog, 2026-12-01:
	// 2.8 ms to the first due row after 1,000 claimed, 12.6 ms after 201,000
	// with autovacuum off, 0.08 ms after a VACUUM). So the cost of a drain
	// grows with the backlog between autovacuums, and more with small
	// batches: there are more claims.
	var speed, memory []row
	var rawRatio float64
	for _, g := range []struct {
		name   string
		drain  func(ctx context.Context, r *relayDB, n int) (time.Duration, error)
		poller bool
	}{
		{"raw SQL claim-and-mark loop, 1 worker, batch 1000", drainRaw(1000), false},
		{"oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms", drainPollers(1, tunedSettings), true},
		{"oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms)", drainPollers(1, defaultSettings), true},
	} {
		var rates, peaks []row
		for _, n := range []int{small, large} {
			c := relayCase{name: g.name + ", backlog of " + thousands(n), n: n, baseline: n == small, drain: g.drain,
				deadline: backlogDeadline}
			got, err := measureRelays(ctx, "backlog", r, []relayCase{c})
			if err != nil {
				return nil, err
			}
			if mem.err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, mem.err)
			}
			rates = append(rates, got[0])
			peaks = append(peaks, mem.last.row(g.name+": peak RSS draining "+thousands(n), n == small))
		}
		rates = withRatios(rates)
		rates[1].Note += fmt.Sprintf("; ratio %s/%s: %.2f×", thousands(large), thousands(small), rates[1].Ratio)
		if g.poller {
			rates[1].Note += fmt.Sprintf(" (the raw loop's in this run: %.2f×)", rawRatio)
			memory = append(memory, withRatios(peaks)...)
		} else {
			rawRatio = rates[1].Ratio
			rates[1].Note += ": what the database alone loses as the backlog grows (each claim's index scan walks past the entries of the rows claimed since the table's last vacuum)"
		}
		speed = append(speed, rates...)
	}

	forwarder, err := forwarderBacklogRows(ctx, e, r, small, large, speed[len(speed)-1])
	if err != nil {
		return nil, err
	}
	return append(append(speed, forwarder...), memory...), nil
}

// forwarderBacklogRows drains Watermill's forwarder (defaults) from a backlog
// of small rows, the baseline, then from one of 300,000 (scaled) within
// e.forwarderDeadline, and compares the second with the poller's defaults at
// the large backlog, pollerDefaults.
func forwarderBacklogRows(ctx context.Context, e *env, r *relayDB, small, large int, pollerDefaults row) ([]row, error) {
	base, err := measureRelays(ctx, "backlog", r, []relayCase{{
		name: "watermill forwarder, defaults, backlog of " + thousands(small), n: small, baseline: true,
		drain: drainForwarder(forwarderDefaults)}})
	if err != nil {
		return nil, err
	}
	n := e.n(300_000, 3_000)
	name := "watermill forwarder, defaults, backlog of " + thousands(n)
	fmt.Fprintf(stderr, "bench: backlog: %s, within %s…\n", name, e.forwarderDeadline)
	got, took, err := forwardBacklog(ctx, r, n, forwarderDefaults, e.forwarderDeadline)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	note := fmt.Sprintf("%d events in %.1fs", n, took.Seconds())
	if got < n {
		note = fmt.Sprintf("did not finish: %s of %s in %.0fs (-forwarder-deadline); the rate is of the events delivered",
			thousands(got), thousands(n), took.Seconds())
	}
	rate := float64(got) / took.Seconds()
	note += "; each poll sorts the whole backlog, so the rate falls as it grows"
	if rate > 0 {
		note += fmt.Sprintf("; the poller with its defaults drained %s at %.1f× this rate", thousands(large), pollerDefaults.Value/rate)
	}
	return withRatios(append(base, row{Case: name, Value: rate, Unit: "rows/s", Note: note})), nil
}

// fillBacklog writes n due events of eventType in one INSERT … SELECT over
// generate_series: the rows the oncebox publisher writes for messages with
// orderPayload and the metadata {"tenant": "acme"}, as newEventRows builds
// them, without n rows travelling from the client. The metadata is the
// publisher's encoding (internal/metadata) of the caller's headers: the event
// id and type are columns, not repeated in it.
//
// Each id is a UUIDv7 made by the server: a 48-bit millisecond timestamp,
// the version, a 12-bit counter (4,096 ids a millisecond, ending before
// created_at) and the variant and random bits of gen_random_uuid(); the ids
// rise in insertion order, as a publisher's do, so the claim's (next_retry_at,
// id) order is the order written. The table is analyzed afterwards, as
// autovacuum would have done to a backlog that built up over time.
func fillBacklog(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, eventType string, n int) error {
	at := time.Now().UTC().Add(-time.Second)
	first := at.UnixMilli() - int64(n/4096) - 1
	md := metadata.Encode(map[string]string{"tenant": "acme"})
	events := d.Tables().Events
	q := `INSERT INTO ` + events + ` (id, event_type, topic, partition_key, message_uuid, payload, metadata,
       status, retry_count, next_retry_at, created_at, updated_at)
SELECT id, $1, $1, NULL, gen_random_uuid()::text, $2::bytea, $3::jsonb,
       'PENDING', 0, $4, $4, $4
  FROM (SELECT (lpad(to_hex($5::bigint + i / 4096), 12, '0') || '7' || lpad(to_hex(i % 4096), 3, '0')
                || substr(replace(gen_random_uuid()::text, '-', ''), 17))::uuid AS id
          FROM generate_series(0, $6::bigint - 1) AS i) AS ids`
	tag, err := pool.Exec(ctx, q, eventType, orderPayload, md, at, first, n)
	if err != nil {
		return fmt.Errorf("fill a backlog of %d events: %w", n, err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("fill a backlog of %d events: inserted %d", n, tag.RowsAffected())
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+events); err != nil {
		return fmt.Errorf("analyze the backlog: %w", err)
	}
	return nil
}

// thousands formats n with commas: 1,000,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
