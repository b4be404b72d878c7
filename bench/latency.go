package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// latencyKey is the metadata key carrying the producer's clock, taken just
// before the event is written and its transaction commits.
const latencyKey = "bench_committed_at"

// latencyRunKey names the case that produced a message: a relay that picks
// up what an earlier case left in a shared table (the forwarder's) must not
// count it.
const latencyRunKey = "bench_run"

// latencyRate is the steady load of the latency scenario, in events per
// second, one event per business transaction.
const latencyRate = 300

// latencyEventType is the event type (and topic) of the latency scenario.
const latencyEventType = "latency"

// latencyCase is one relay of the latency scenario. start runs it,
// publishing to out and, for a poller, reporting its polls to polls; write
// writes msg inside the producer's transaction tx.
type latencyCase struct {
	name     string
	baseline bool
	start    func(ctx context.Context, out message.Publisher, polls *pollHooks) (stop func() error, err error)
	write    func(tx pgx.Tx, msg *message.Message) error
}

// runLatency measures commit-to-publish latency under a steady load: a
// producer commits one event per transaction at 300 events/s for about 10
// seconds, each carrying the time taken just before it is written (so the
// figure includes the INSERT and the COMMIT, well under a millisecond), and
// the no-op publisher records now minus that time for each message it gets.
// Reported: p99 and p50 of the oncebox poller with its defaults (which on
// PostgreSQL with pgx include the wake-up on commit), the same without the
// wake-up, and tuned for polling, against Watermill's forwarder with its
// defaults and tuned, all in the same run.
func runLatency(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	if err := initForwarderSchema(pgWM(e.pool)); err != nil {
		return nil, err
	}
	n := latencyRate * e.n(10, 3)
	var p99, p50 []row
	for _, c := range latencyCases(e, d) {
		fmt.Fprintf(stderr, "bench: latency: %s, %d events…\n", c.name, n)
		lat, polls, err := measureLatency(ctx, e, c, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		note := fmt.Sprintf("%d events at %d/s", n, latencyRate)
		if k := polls.polls.Load(); k > 0 {
			note += fmt.Sprintf("; %d polls, %.0f events a poll on average", k, float64(polls.claimed.Load())/float64(k))
		}
		p99 = append(p99, row{Case: c.name + ": p99", Value: ms(percentile(lat, 0.99)), Unit: "ms", Baseline: c.baseline, Note: note})
		p50 = append(p50, row{Case: c.name + ": p50", Value: ms(percentile(lat, 0.50)), Unit: "ms", Baseline: c.baseline})
	}
	return append(withRatios(p99), withRatios(p50)...), nil
}

// latencyCases are the relays compared, the forwarder first: each writes
// the way its users write (forwarder.NewPublisher over watermill-sql's
// publisher on the transaction, or oncebox's publisher on it).
func latencyCases(e *env, d dialects.Dialect) []latencyCase {
	writeForwarder := func(tx pgx.Tx, msg *message.Message) error {
		pub, err := forwarderPublisher(wsql.TxFromPgx(tx), wmSchema(0))
		if err != nil {
			return err
		}
		return pub.Publish(latencyEventType, msg)
	}
	// wake: the wake-up on commit (the default on PostgreSQL with pgx);
	// without it, both the publisher and the relay are set to poll only.
	writeOncebox := func(wake bool) func(tx pgx.Tx, msg *message.Message) error {
		return func(tx pgx.Tx, msg *message.Message) error {
			pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: d, DisableWakeOnCommit: !wake}, watermill.NopLogger{})
			if err != nil {
				return err
			}
			return pub.Publish(latencyEventType, msg)
		}
	}
	startPoller := func(s oncebox.EventSettings, wake bool) func(context.Context, message.Publisher, *pollHooks) (func() error, error) {
		return func(ctx context.Context, out message.Publisher, polls *pollHooks) (func() error, error) {
			cfg := pollerConfig(d, 0, latencyEventType, s, polls)
			cfg.DisableWakeOnCommit = !wake
			return startPollers(ctx, wsql.BeginnerFromPgx(e.pool), out, cfg)
		}
	}
	startForwarderWith := func(o forwarderOptions) func(context.Context, message.Publisher, *pollHooks) (func() error, error) {
		return func(ctx context.Context, out message.Publisher, _ *pollHooks) (func() error, error) {
			return startForwarder(ctx, pgWM(e.pool), out, o)
		}
	}
	return []latencyCase{
		{name: "watermill forwarder, defaults", baseline: true, start: startForwarderWith(forwarderDefaults), write: writeForwarder},
		{name: "watermill forwarder, tuned (poll 10ms, batch 1000)", start: startForwarderWith(forwarderTuned), write: writeForwarder},
		{name: "oncebox poller, defaults (wake-up on commit, batch 200, 250ms–1m, ×1.5)", start: startPoller(defaultSettings, true), write: writeOncebox(true)},
		{name: "oncebox poller, defaults without wake-up (polling only)", start: startPoller(defaultSettings, false), write: writeOncebox(false)},
		{name: "oncebox poller, tuned, polling only (batch 1000, 1ms–50ms, ×2)", start: startPoller(tunedSettings, false), write: writeOncebox(false)},
	}
}

// measureLatency runs c's relay, produces n events at latencyRate through
// c.write, waits until the relay published all of them, and returns the
// latencies sorted.
func measureLatency(ctx context.Context, e *env, c latencyCase, n int) ([]time.Duration, *pollHooks, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n/latencyRate)*time.Second+90*time.Second)
	defer cancel()
	run := watermill.NewUUID()
	rec := newLatencies(n, run)
	out := newSink(n, rec.record)
	polls := &pollHooks{}
	stop, err := c.start(ctx, out, polls)
	if err != nil {
		return nil, nil, err
	}
	err = produce(ctx, e.pool, n, run, c.write)
	if err == nil {
		err = rec.unique.wait(ctx, "events published")
	}
	if err := errors.Join(err, stop(), rec.err()); err != nil {
		return nil, nil, err
	}
	lat := rec.sorted()
	if len(lat) != n {
		return nil, nil, fmt.Errorf("%d events produced, %d published", n, len(lat))
	}
	return lat, polls, nil
}

// produce commits n business transactions at latencyRate, each writing one
// event with write. It keeps to the schedule: a late transaction does not
// push back the next ones.
func produce(ctx context.Context, pool *pgxpool.Pool, n int, run string, write func(tx pgx.Tx, msg *message.Message) error) error {
	period := time.Second / latencyRate
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range n {
		timer.Reset(time.Until(start.Add(time.Duration(i) * period)))
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("produced %d of %d events: %w", i, n, ctx.Err())
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			msg := message.NewMessage(watermill.NewUUID(), orderPayload)
			msg.Metadata.Set(latencyKey, time.Now().UTC().Format(time.RFC3339Nano))
			msg.Metadata.Set(latencyRunKey, run)
			return write(tx, msg)
		})
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	return nil
}

// latencies collects, for each message a relay publishes, the time since
// the producer stamped it. It is safe for concurrent use.
// A message published again (at-least-once: the forwarder's subscriber
// redelivers a batch whose ack was lost) counts once, at its first
// publication; the others are counted as duplicates.
type latencies struct {
	mu         sync.Mutex
	d          []time.Duration
	seen       map[string]bool
	duplicates int
	unique     *countdown // reaches its target once every event was published
	run        string     // the case's messages carry it in latencyRunKey
	firstErr   error
}

func newLatencies(n int, run string) *latencies {
	return &latencies{seen: make(map[string]bool, n), unique: newCountdown(n), run: run}
}

func (l *latencies) record(msg *message.Message) {
	if msg.Metadata.Get(latencyRunKey) != l.run {
		return // left over by an earlier case
	}
	at, err := time.Parse(time.RFC3339Nano, msg.Metadata.Get(latencyKey))
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.firstErr == nil {
			l.firstErr = fmt.Errorf("message %s: %s: %w", msg.UUID, latencyKey, err)
		}
		return
	}
	if l.seen[msg.UUID] {
		l.duplicates++
		return
	}
	l.seen[msg.UUID] = true
	l.d = append(l.d, now.Sub(at))
	l.unique.add(1)
}

func (l *latencies) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.firstErr
}

func (l *latencies) sorted() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s
}

// percentile returns the nearest-rank p-quantile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pollHooks counts a poller's polls and the events they claimed.
type pollHooks struct {
	poller.NopHooks
	polls, claimed atomic.Int64
}

// PollDone implements poller.Hooks.
func (h *pollHooks) PollDone(i poller.PollInfo) {
	h.polls.Add(1)
	h.claimed.Add(int64(i.Claimed))
}
