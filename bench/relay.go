package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/poller"
)

// relayDeadline bounds the drain of one relay case.
const relayDeadline = 3 * time.Minute

// relayEventType is the event type (and topic) of the relay backlogs.
const relayEventType = "bench"

// relayDB is the database the relay cases run on: PostgreSQL through pgx,
// or MariaDB through database/sql. The cases run the same code on either.
type relayDB struct {
	// db is the handle of the dialect, the pollers and the backlogs.
	db wsql.Beginner
	// wm is where Watermill's forwarder runs.
	wm wmDB
	// fresh drops and re-creates the bench schema, migrated, and returns
	// its dialect.
	fresh func(ctx context.Context) (dialects.Dialect, error)
	// claimAndMark is one step of the raw loop: it claims up to limit due
	// events of relayEventType, marks them PROCESSED and returns how many
	// it claimed.
	claimAndMark func(ctx context.Context, d dialects.Dialect, limit int) (int, error)
	// watch, unless nil, starts watching the server for other clients'
	// work before a case; the function it returns stops and says what it
	// saw, for the case's note, and whether other clients were busy enough
	// to run the case again.
	watch func(ctx context.Context) (stop func() watched)
	// clock, unless nil, is told when a case's clock starts (true) and
	// stops (false).
	clock func(start bool)
	// fill, unless nil, writes the n events of relayEventType a case
	// drains, instead of insertBacklog.
	fill func(ctx context.Context, d dialects.Dialect, n int) error
}

// backlog writes the n due events of relayEventType a case drains.
func (r *relayDB) backlog(ctx context.Context, d dialects.Dialect, n int) error {
	if r.fill != nil {
		return r.fill(ctx, d, n)
	}
	return insertBacklog(ctx, r.db, d, relayEventType, n)
}

// startClock starts a case's clock.
func (r *relayDB) startClock() time.Time {
	if r.clock != nil {
		r.clock(true)
	}
	return time.Now()
}

// stopClock stops a case's clock started at start and returns the time.
func (r *relayDB) stopClock(start time.Time) time.Duration {
	took := time.Since(start)
	if r.clock != nil {
		r.clock(false)
	}
	return took
}

// pgRelayDB is the relay scenario's PostgreSQL: the bench pool, and a raw
// loop of one claim statement and one mark statement sent through pgx.
func (e *env) pgRelayDB() *relayDB {
	return &relayDB{db: wsql.BeginnerFromPgx(e.pool), wm: pgWM(e.pool),
		fresh: func(ctx context.Context) (dialects.Dialect, error) {
			d, err := e.freshSchema(ctx)
			if err != nil {
				return nil, err
			}
			return d, nil
		},
		claimAndMark: func(ctx context.Context, d dialects.Dialect, limit int) (int, error) {
			return claimAndMark(ctx, e.pool, d.(*postgres.Dialect), limit)
		}}
}

// relayCase is one row of a relay scenario: drain relays a backlog of n
// events it wrote itself and returns the time from start to the last event
// done, within deadline (0: relayDeadline).
type relayCase struct {
	name     string
	n        int
	baseline bool
	note     string
	drain    func(ctx context.Context, r *relayDB, n int) (time.Duration, error)
	deadline time.Duration
}

// runRelay measures how fast each relay drains a backlog of due events to a
// no-op publisher, in rows per second from start until the last event is
// done (marked PROCESSED, or acked by the forwarder).
//
// The baseline is the least work any relay on this table must do: a loop
// that claims 1,000 rows and marks them PROCESSED, building no message and
// publishing nothing. Against it: the oncebox poller tuned for throughput
// (one and two instances on one table), the poller with its defaults, and Watermill's forwarder over
// watermill-sql, with its defaults and tuned. Each case gets a fresh schema
// and its own backlog, written before the clock starts.
func runRelay(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(100_000, 2_000)
	nDefaults := n
	// The order of the cases; relayGoals compares rows by these indices.
	const (
		caseRaw = iota
		casePoller1
		casePoller2
		casePollerDelete
		casePollerDefaults
		caseForwarderDefaults
		caseForwarderTuned
	)
	cases := []relayCase{
		caseRaw: {name: "raw SQL claim-and-mark loop, 1 worker", n: n, baseline: true, drain: drainRaw(1000),
			note: "the limit of any relay: claim 1,000, mark PROCESSED, repeat"},
		casePoller1: {name: "oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(1, tunedSettings)},
		casePoller2: {name: "oncebox poller, 2 instances, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(2, tunedSettings)},
		casePollerDelete: {name: "oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms, finalize: delete", n: n,
			drain: drainPollersFinalize(1, tunedSettings, false, oncebox.FinalizeDelete),
			note:  "the confirmed rows deleted at finalize (outbox.finalize: delete): no PROCESSED row, nothing for the clean-up"},
		casePollerDefaults: {name: "oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms)", n: nDefaults,
			drain: drainPollers(1, defaultSettings),
			note:  "a full batch is claimed again at once; min-fixed-delay paces partial and empty polls only"},
		caseForwarderDefaults: {name: "watermill forwarder, defaults", n: n, drain: drainForwarder(forwarderDefaults),
			note: "watermill-sql's defaults: 100 rows a query, 1s poll when empty; messages go through the router one at a time"},
		caseForwarderTuned: {name: "watermill forwarder, tuned (poll 10ms, batch 1000)", n: n, drain: drainForwarder(forwarderTuned)},
	}
	rows, err := measureRelays(ctx, "relay", e.pgRelayDB(), cases)
	if err != nil {
		return nil, err
	}
	rows[casePoller1].Note += "; " + relayGoals(rows[casePoller1], rows[caseForwarderTuned], rows[caseForwarderDefaults])
	rows[casePollerDefaults].Note += fmt.Sprintf("; %.2f× the default forwarder (goal ≥ 5×)",
		rows[casePollerDefaults].Value/rows[caseForwarderDefaults].Value)
	return rows, nil
}

// watched is what a relayDB's watch saw during a case: about the case
// (stmts) and about the server's other clients (others), and whether those
// were busy enough to run the case again (noisy).
type watched struct {
	stmts, others string
	noisy         bool
}

// measureRelays drains the backlog of each case on r in turn and returns
// one row per case, in rows per second, with ratios to the baseline case.
// scenario prefixes the progress lines. A case whose watch found the server
// busy with other clients runs once more, and the faster run is kept.
func measureRelays(ctx context.Context, scenario string, r *relayDB, cases []relayCase) ([]row, error) {
	rows := make([]row, len(cases))
	for i, c := range cases {
		var (
			best    time.Duration
			seen    watched
			earlier []string
		)
		for attempt := 0; attempt < 2; attempt++ {
			fmt.Fprintf(stderr, "bench: %s: %s, %d events…\n", scenario, c.name, c.n)
			took, w, err := drainOnce(ctx, r, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
			if best == 0 || took < best {
				if best != 0 {
					earlier = append(earlier, fmt.Sprintf("%.0f rows/s (%s)", float64(c.n)/best.Seconds(), seen.others))
				}
				best, seen = took, w
			} else {
				earlier = append(earlier, fmt.Sprintf("%.0f rows/s (%s)", float64(c.n)/took.Seconds(), w.others))
			}
			if !w.noisy {
				break
			}
		}
		note := fmt.Sprintf("%d events in %.1fs", c.n, best.Seconds())
		for _, s := range []string{c.note, seen.stmts, seen.others} {
			if s != "" {
				note += "; " + s
			}
		}
		if len(earlier) > 0 {
			note += "; run twice, the server being busy with other clients; the slower run: " + strings.Join(earlier, ", ")
		}
		rows[i] = row{Case: c.name, Value: float64(c.n) / best.Seconds(), Unit: "rows/s", Baseline: c.baseline, Note: note}
	}
	return withRatios(rows), nil
}

// drainOnce runs case c once on r within its deadline and returns its time
// and what r's watch saw meanwhile.
func drainOnce(ctx context.Context, r *relayDB, c relayCase) (took time.Duration, w watched, err error) {
	deadline := c.deadline
	if deadline == 0 {
		deadline = relayDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var stop func() watched
	if r.watch != nil {
		stop = r.watch(ctx)
	}
	took, err = c.drain(ctx, r, c.n)
	if stop != nil {
		w = stop()
	}
	return took, w, err
}

// relayGoals says how the one-instance poller stands against the issue's
// goals: ≥ 0.75× the raw loop, ahead of the tuned forwarder, ≥ 2× the
// default forwarder.
func relayGoals(poller, tuned, defaults row) string {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	return strings.Join([]string{
		fmt.Sprintf("goal ≥ 0.75× raw: %s", verdict(poller.Ratio >= 0.75)),
		fmt.Sprintf("goal ahead of the tuned forwarder: %s (%.2f×)", verdict(poller.Value > tuned.Value), poller.Value/tuned.Value),
		fmt.Sprintf("goal ≥ 2× the default forwarder: %s (%.2f×)", verdict(poller.Value >= 2*defaults.Value), poller.Value/defaults.Value),
	}, "; ")
}

// drainRaw is the baseline: claim batch events (a new token each time) and
// mark them PROCESSED with the database's claimAndMark, until a claim comes
// back empty.
func drainRaw(batch int) func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
	return func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
		d, err := r.fresh(ctx)
		if err != nil {
			return 0, err
		}
		if err := r.backlog(ctx, d, n); err != nil {
			return 0, err
		}
		start := r.startClock()
		total := 0
		for {
			k, err := r.claimAndMark(ctx, d, batch)
			if err != nil {
				return 0, err
			}
			if k == 0 {
				break
			}
			total += k
		}
		took := r.stopClock(start)
		if total != n {
			return 0, fmt.Errorf("raw loop processed %d events of %d", total, n)
		}
		return took, nil
	}
}

// claimAndMark claims up to limit due events and marks them PROCESSED, both
// sent through pgx as a hand-written loop would: the statements are the
// PostgreSQL dialect's unordered claim and mark (dialects/testdata/
// postgres_relay.sql), written out here. It returns how many it claimed.
func claimAndMark(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, limit int) (int, error) {
	token, err := oncebox.NewEventID()
	if err != nil {
		return 0, err
	}
	events := d.Tables().Events
	now := time.Now().UTC()
	rows, err := pool.Query(ctx, `WITH due AS (
    SELECT id FROM `+events+`
     WHERE status = 'PENDING' AND event_type = $1 AND next_retry_at <= $2
     ORDER BY next_retry_at, id
     LIMIT $3
       FOR UPDATE SKIP LOCKED
)
UPDATE `+events+` e
   SET status = 'IN_PROCESS', claim_token = $4, claimed_at = $2, updated_at = $2
  FROM due
 WHERE e.id = due.id
RETURNING e.id, e.topic, e.partition_key, e.message_uuid, e.payload, e.metadata, e.retry_count, e.next_retry_at, e.first_failed_at`,
		relayEventType, now, limit, token.String())
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var ev dialects.ClaimedEvent
		err := r.Scan(ev.ScanTargets()...)
		return ev.ID.String(), err
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if _, err := pool.Exec(ctx, "UPDATE "+events+` SET status = 'PROCESSED', updated_at = $1
 WHERE id = ANY($2::uuid[]) AND claim_token = $3 AND status = 'IN_PROCESS'`,
		time.Now().UTC(), ids, token.String()); err != nil {
		return 0, fmt.Errorf("mark processed: %w", err)
	}
	return len(ids), nil
}

// dialectClaimAndMark is the raw loop's step through the dialect: Claim, then
// MarkProcessed of every id claimed, on db. On MySQL the claim is a probe
// (SELECT 1 … LIMIT 1, outside any transaction) and, when rows are due, a
// READ COMMITTED transaction (SELECT … FOR UPDATE SKIP LOCKED, UPDATE); the
// mark is a READ COMMITTED transaction of its own.
func dialectClaimAndMark(db wsql.Beginner) func(ctx context.Context, d dialects.Dialect, limit int) (int, error) {
	return func(ctx context.Context, d dialects.Dialect, limit int) (int, error) {
		token, err := oncebox.NewEventID()
		if err != nil {
			return 0, err
		}
		claimed, err := d.Claim(ctx, db, dialects.ClaimParams{EventType: relayEventType, Limit: limit, Token: token,
			Now: time.Now().UTC()})
		if err != nil || len(claimed) == 0 {
			return 0, err
		}
		ids := make([]oncebox.EventID, len(claimed))
		for i := range claimed {
			ids[i] = claimed[i].ID
		}
		marked, err := d.MarkProcessed(ctx, db, token, ids, time.Now().UTC())
		if err != nil {
			return 0, fmt.Errorf("mark processed: %w", err)
		}
		if len(marked) != len(ids) {
			return 0, fmt.Errorf("claimed %d events, marked %d", len(ids), len(marked))
		}
		return len(ids), nil
	}
}

// drainPollers runs instances oncebox pollers with settings s on one table
// until the Sent hook has counted every event, then checks that every row is
// PROCESSED and that the publisher got each event once.
func drainPollers(instances int, s oncebox.EventSettings) func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
	return drainPollersWith(instances, s, false)
}

// drainPollersWith is drainPollers whose no-op publisher, with keepsOrder,
// says it keeps a key's order within one call (poller.KeyOrderKeeper, as
// the kafka package's publisher does): an ordered type's claims then take
// several events of a key.
func drainPollersWith(instances int, s oncebox.EventSettings, keepsOrder bool) func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
	return drainPollersFinalize(instances, s, keepsOrder, oncebox.FinalizeMark)
}

// drainPollersFinalize is drainPollersWith with outbox.finalize set to
// finalize: with oncebox.FinalizeDelete the check at the end is that no
// row is left, in place of n PROCESSED.
func drainPollersFinalize(instances int, s oncebox.EventSettings, keepsOrder bool, finalize string) func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
	return func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
		d, err := r.fresh(ctx)
		if err != nil {
			return 0, err
		}
		if err := r.backlog(ctx, d, n); err != nil {
			return 0, err
		}
		out := newSink(n, nil)
		var pub message.Publisher = out
		if keepsOrder {
			pub = orderKeepingSink{out}
		}
		hooks := sentHooks{sent: newCountdown(n)}
		configs := make([]poller.Config, instances)
		for i := range configs {
			configs[i] = pollerConfig(d, i, relayEventType, s, hooks)
			configs[i].Oncebox.Outbox.Finalize = finalize
		}
		start := r.startClock()
		stop, err := startPollers(ctx, r.db, pub, configs...)
		if err != nil {
			return 0, err
		}
		waitErr := hooks.sent.wait(ctx, "events sent")
		took := r.stopClock(start)
		if err := errors.Join(waitErr, stop()); err != nil {
			return 0, err
		}
		if finalize == oncebox.FinalizeDelete {
			left, err := countRows(ctx, r.db, d)
			if err != nil {
				return 0, err
			}
			if left != 0 || out.count() != n {
				return 0, fmt.Errorf("%d events, finalize delete: %d rows left, %d published", n, left, out.count())
			}
			return took, nil
		}
		processed, err := countStatus(ctx, r.db, d, oncebox.StatusProcessed)
		if err != nil {
			return 0, err
		}
		if processed != n || out.count() != n {
			return 0, fmt.Errorf("%d events: %d PROCESSED, %d published", n, processed, out.count())
		}
		return took, nil
	}
}

// drainForwarder writes the backlog through forwarder.NewPublisher, then
// runs Watermill's forwarder with opts until the no-op publisher has every
// message.
func drainForwarder(opts forwarderOptions) func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
	return func(ctx context.Context, r *relayDB, n int) (time.Duration, error) {
		_, took, err := forwardBacklog(ctx, r, n, opts, 0)
		return took, err
	}
}

// forwardBacklog writes a backlog of n messages through
// forwarder.NewPublisher, then runs Watermill's forwarder with opts until the
// no-op publisher has every message or, when limit is not 0, until limit has
// passed. It returns how many messages the publisher had when the clock
// stopped and the time; reaching limit is not an error, running out of ctx is.
func forwardBacklog(ctx context.Context, r *relayDB, n int, opts forwarderOptions, limit time.Duration) (int, time.Duration, error) {
	if _, err := r.fresh(ctx); err != nil {
		return 0, 0, err
	}
	if err := initForwarderSchema(r.wm); err != nil {
		return 0, 0, err
	}
	if err := insertForwarderBacklog(r.wm, relayEventType, n); err != nil {
		return 0, 0, err
	}
	out := newSink(n, nil)
	start := r.startClock()
	stop, err := startForwarder(ctx, r.wm, out, opts)
	if err != nil {
		return 0, 0, err
	}
	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if limit > 0 {
		waitCtx, cancel = context.WithTimeout(ctx, limit)
	}
	waitErr := out.wait(waitCtx, "messages forwarded")
	cancel()
	took := r.stopClock(start)
	got := out.count()
	if limit > 0 && ctx.Err() == nil {
		waitErr = nil // the limit, not the run's deadline
	}
	if err := errors.Join(waitErr, stop()); err != nil {
		return 0, 0, err
	}
	if limit == 0 && got != n {
		return 0, 0, fmt.Errorf("%d messages: the forwarder published %d", n, got)
	}
	return min(got, n), took, nil
}
