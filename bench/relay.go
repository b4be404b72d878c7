package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// relayDeadline bounds the drain of one relay case.
const relayDeadline = 3 * time.Minute

// relayEventType is the event type (and topic) of the relay backlogs.
const relayEventType = "bench"

// relayCase is one row of the relay scenario: drain relays a backlog of n
// events it wrote itself and returns the time from start to the last event
// done.
type relayCase struct {
	name     string
	n        int
	baseline bool
	note     string
	drain    func(ctx context.Context, e *env, n int) (time.Duration, error)
}

// runRelay measures how fast each relay drains a backlog of due events to a
// no-op publisher, in rows per second from start until the last event is
// done (marked PROCESSED, or acked by the forwarder).
//
// The baseline is the least work any relay on this table must do: a loop
// that claims 1,000 rows and marks them PROCESSED, building no message and
// publishing nothing. Against it: the oncebox poller tuned for throughput
// (one and two instances on one table), the poller with its defaults (whose
// pace is set by design, not by the database), and Watermill's forwarder over
// watermill-sql, with its defaults and tuned. Each case gets a fresh schema
// and its own backlog, written before the clock starts.
func runRelay(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(100_000, 2_000)
	nDefaults := e.n(10_000, 1_000)
	// The order of the cases; relayGoals compares rows by these indices.
	const (
		caseRaw = iota
		casePoller1
		casePoller2
		casePollerDefaults
		caseForwarderDefaults
		caseForwarderTuned
	)
	cases := []relayCase{
		caseRaw: {name: "raw SQL claim-and-mark loop, 1 worker", n: n, baseline: true, drain: drainRaw,
			note: "the limit of any relay: claim 1,000, mark PROCESSED, repeat"},
		casePoller1: {name: "oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(1, tunedSettings)},
		casePoller2: {name: "oncebox poller, 2 instances, batch 1000, min-fixed-delay 1ms", n: n, drain: drainPollers(2, tunedSettings)},
		casePollerDefaults: {name: "oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms)", n: nDefaults,
			drain: drainPollers(1, defaultSettings),
			note:  "paced by design: batch-size / min-fixed-delay = 200 / 250ms ≈ 800/s"},
		caseForwarderDefaults: {name: "watermill forwarder, defaults", n: n, drain: drainForwarder(forwarderDefaults),
			note: "watermill-sql's defaults: 100 rows a query, 1s poll when empty; messages go through the router one at a time"},
		caseForwarderTuned: {name: "watermill forwarder, tuned (poll 10ms, batch 1000)", n: n, drain: drainForwarder(forwarderTuned)},
	}
	rows := make([]row, len(cases))
	for i, c := range cases {
		fmt.Fprintf(stderr, "bench: relay: %s, %d events…\n", c.name, c.n)
		cctx, cancel := context.WithTimeout(ctx, relayDeadline)
		took, err := c.drain(cctx, e, c.n)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		note := fmt.Sprintf("%d events in %.1fs", c.n, took.Seconds())
		if c.note != "" {
			note += "; " + c.note
		}
		rows[i] = row{Case: c.name, Value: float64(c.n) / took.Seconds(), Unit: "rows/s", Baseline: c.baseline, Note: note}
	}
	rows = withRatios(rows)
	rows[casePoller1].Note += "; " + relayGoals(rows[casePoller1], rows[caseForwarderTuned], rows[caseForwarderDefaults])
	return rows, nil
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

// drainRaw is the baseline: claim with the dialect's EventsClaim (batch
// 1,000, a new token each time), scan the ids, mark them PROCESSED, until a
// claim comes back empty.
func drainRaw(ctx context.Context, e *env, n int) (time.Duration, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return 0, err
	}
	if err := insertBacklog(ctx, e.pool, d, relayEventType, n); err != nil {
		return 0, err
	}
	start := time.Now()
	total := 0
	for {
		k, err := claimAndMark(ctx, e, d, 1000)
		if err != nil {
			return 0, err
		}
		if k == 0 {
			break
		}
		total += k
	}
	took := time.Since(start)
	if total != n {
		return 0, fmt.Errorf("raw loop processed %d events of %d", total, n)
	}
	return took, nil
}

// claimAndMark claims up to limit due events and marks them PROCESSED; it
// returns how many it claimed.
func claimAndMark(ctx context.Context, e *env, d *dialects.PostgreSQL, limit int) (int, error) {
	token, err := oncebox.NewEventID()
	if err != nil {
		return 0, err
	}
	q := d.EventsClaim(dialects.ClaimParams{EventType: relayEventType, Limit: limit, Token: token, Now: time.Now().UTC()})
	rows, err := e.pool.Query(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (oncebox.EventID, error) {
		var ev dialects.ClaimedEvent
		err := r.Scan(ev.ScanTargets()...)
		return ev.ID, err
	})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	m := d.EventsMarkProcessed(token, ids, time.Now().UTC())
	if _, err := e.pool.Exec(ctx, m.SQL, m.Args...); err != nil {
		return 0, fmt.Errorf("mark processed: %w", err)
	}
	return len(ids), nil
}

// drainPollers runs instances oncebox pollers with settings s on one table
// until the Sent hook has counted every event, then checks that every row is
// PROCESSED and that the publisher got each event once.
func drainPollers(instances int, s oncebox.EventSettings) func(ctx context.Context, e *env, n int) (time.Duration, error) {
	return func(ctx context.Context, e *env, n int) (time.Duration, error) {
		d, err := e.freshSchema(ctx)
		if err != nil {
			return 0, err
		}
		if err := insertBacklog(ctx, e.pool, d, relayEventType, n); err != nil {
			return 0, err
		}
		out := newSink(n, nil)
		hooks := sentHooks{sent: newCountdown(n)}
		configs := make([]poller.Config, instances)
		for i := range configs {
			configs[i] = pollerConfig(d, i, relayEventType, s, hooks)
		}
		start := time.Now()
		stop, err := startPollers(ctx, e.pool, out, configs...)
		if err != nil {
			return 0, err
		}
		waitErr := hooks.sent.wait(ctx, "events sent")
		took := time.Since(start)
		if err := errors.Join(waitErr, stop()); err != nil {
			return 0, err
		}
		processed, err := countStatus(ctx, e.pool, d, oncebox.StatusProcessed)
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
func drainForwarder(opts forwarderOptions) func(ctx context.Context, e *env, n int) (time.Duration, error) {
	return func(ctx context.Context, e *env, n int) (time.Duration, error) {
		if _, err := e.freshSchema(ctx); err != nil {
			return 0, err
		}
		if err := initForwarderSchema(e.pool); err != nil {
			return 0, err
		}
		if err := insertForwarderBacklog(e.pool, relayEventType, n); err != nil {
			return 0, err
		}
		out := newSink(n, nil)
		start := time.Now()
		stop, err := startForwarder(ctx, e.pool, out, opts)
		if err != nil {
			return 0, err
		}
		waitErr := out.wait(ctx, "messages forwarded")
		took := time.Since(start)
		if err := errors.Join(waitErr, stop()); err != nil {
			return 0, err
		}
		if out.count() != n {
			return 0, fmt.Errorf("%d messages: the forwarder published %d", n, out.count())
		}
		return took, nil
	}
}
