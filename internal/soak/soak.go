// Package soak drives oncebox at a steady rate for a long time and reports,
// minute by minute, what an operator watches on PostgreSQL (issue 28 item
// 8, docs/postgresql.md "A 60-minute run"): commit-to-publish latency, the
// outbox table's and indexes' size, dead tuples, and statements per event,
// with the clean-up job deleting PROCESSED rows after a short ttl so that
// the table should stay flat. At the end it checks that every committed
// event was delivered exactly once.
//
// Producers commit one event per business transaction through oncebox's
// publisher, paced by a token schedule (a late transaction does not push
// back the next ones); two poller instances relay to an in-memory sink that
// records, per event, the time since the producer stamped it just before
// the INSERT and COMMIT. The bench's soak scenario and the e2e test
// TestSoakTwoMinutes both run it, each on a cluster of its own with
// autovacuum on (internal/pgcluster, scripts/pgcluster.sh).
package soak

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// Metadata keys the producers set on each event.
const (
	// seqKey carries the event's sequence number, the index of the ledger.
	seqKey = "soak_seq"
	// stampKey carries the producer's clock (Unix nanoseconds), taken just
	// before the event is written and its transaction commits.
	stampKey = "soak_committed_at"
)

// eventType is the event type (and topic) of the soak.
const eventType = "soak"

// Options configures a Run. Zero fields take the defaults noted.
type Options struct {
	// DSN is the PostgreSQL the soak runs on (a cluster of its own: it
	// migrates the default schema's tables and reads server-wide
	// statistics).
	DSN string
	// Duration is how long the producers publish. Required.
	Duration time.Duration
	// Rate is the steady load, events per second. Required.
	Rate int
	// CleanUpTTL is the outbox clean-up ttl: PROCESSED rows older than it
	// are deleted. Default 1m.
	CleanUpTTL time.Duration
	// CleanUpEvery is the clean-up job's pace (its Schedule Min and Max).
	// Default 10s.
	CleanUpEvery time.Duration
	// Interval is the sampling period of the report. Default 1m.
	Interval time.Duration
	// Producers is the number of producer goroutines sharing the schedule.
	// Default 16.
	Producers int
	// Relays is the number of poller instances. Default 2.
	Relays int
	// Drain bounds the wait, after the producers stop, for the relays to
	// deliver what is left. Default 2m.
	Drain time.Duration
	// Progress, unless nil, is given each sample as it is taken.
	Progress func(Sample)
}

func (o Options) withDefaults() Options {
	if o.CleanUpTTL == 0 {
		o.CleanUpTTL = time.Minute
	}
	if o.CleanUpEvery == 0 {
		o.CleanUpEvery = 10 * time.Second
	}
	if o.Interval == 0 {
		o.Interval = time.Minute
	}
	if o.Producers == 0 {
		o.Producers = 16
	}
	if o.Relays == 0 {
		o.Relays = 2
	}
	if o.Drain == 0 {
		o.Drain = 2 * time.Minute
	}
	return o
}

// Sample is one interval of the run. Latencies are of the events committed
// in the interval (computed at the end, once all were delivered); the
// rest is read at the interval's end.
type Sample struct {
	// Index counts intervals from 1; At is the interval's end since the
	// start.
	Index int
	At    time.Duration
	// Committed is the events committed in the interval.
	Committed int
	// P50 and P99 are commit-to-publish latencies of those events.
	P50, P99 time.Duration
	// TableBytes is pg_relation_size of the outbox table (heap only),
	// IndexBytes pg_indexes_size, TotalBytes pg_total_relation_size.
	TableBytes, IndexBytes, TotalBytes int64
	// Live and Dead are n_live_tup and n_dead_tup (pg_stat_user_tables);
	// AutoVacuums is autovacuum_count so far.
	Live, Dead, AutoVacuums int64
	// Statements is the statements the soak's connections sent in the
	// interval (counted client-side by a pgx tracer on every pool but the
	// sampler's): producers, relays, clean-up.
	Statements int64
	// Xacts is xact_commit + xact_rollback of the database in the
	// interval (pg_stat_database: autovacuum's are not counted there).
	Xacts int64
	// Load1 is the machine's 1-minute load average at the interval's end.
	Load1 float64
	// CommittedSoFar and DeliveredSoFar are the running totals at the
	// interval's end (CommittedSoFar counts every Run of the process).
	CommittedSoFar, DeliveredSoFar int64
}

// StatementsPerEvent is Statements / Committed.
func (s Sample) StatementsPerEvent() float64 {
	if s.Committed == 0 {
		return 0
	}
	return float64(s.Statements) / float64(s.Committed)
}

// Result is what Run measured.
type Result struct {
	Samples []Sample
	// Committed is the events whose transaction committed; Delivered the
	// distinct ones the sink got; Duplicates the deliveries beyond the
	// first; Lost the committed events never delivered.
	Committed, Delivered, Duplicates, Lost int
	// Left is the outbox rows not PROCESSED at the end (PENDING,
	// IN_PROCESS, FAILED): 0 when the relays finished.
	Left int64
	// Elapsed is the producers' time; Rate the achieved events/s.
	Elapsed time.Duration
	Rate    float64
	// P50 and P99 are over every event.
	P50, P99 time.Duration
	// FinalTotalBytes is the outbox's total size after the drain and one
	// last clean-up window.
	FinalTotalBytes int64
}

// ExactlyOnce says whether every committed event was delivered once.
func (r Result) ExactlyOnce() bool { return r.Lost == 0 && r.Duplicates == 0 }

// ledger is indexed by sequence number: whether the event's transaction
// committed, how many times it was delivered, and its latency.
type ledger struct {
	committed []atomic.Bool
	delivered []atomic.Int32
	latency   []atomic.Int64 // nanoseconds, at first delivery
	stamp     []atomic.Int64 // the producer's clock, Unix nanoseconds
}

func newLedger(n int) *ledger {
	return &ledger{committed: make([]atomic.Bool, n), delivered: make([]atomic.Int32, n),
		latency: make([]atomic.Int64, n), stamp: make([]atomic.Int64, n)}
}

// sink is the broker the relays publish to: it records each delivery in
// the ledger.
type sink struct {
	l        *ledger
	bad      atomic.Int64
	received atomic.Int64
}

func (s *sink) Publish(_ string, msgs ...*message.Message) error {
	now := time.Now().UnixNano()
	for _, m := range msgs {
		seq, err1 := strconv.Atoi(m.Metadata.Get(seqKey))
		at, err2 := strconv.ParseInt(m.Metadata.Get(stampKey), 10, 64)
		if err1 != nil || err2 != nil || seq < 0 || seq >= len(s.l.delivered) {
			s.bad.Add(1)
			continue
		}
		if s.l.delivered[seq].Add(1) == 1 {
			s.l.latency[seq].Store(now - at)
			s.received.Add(1)
		}
	}
	return nil
}

func (s *sink) Close() error { return nil }

// counter is a pgx tracer counting the statements sent.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func newPool(ctx context.Context, dsn string, maxConns int32, tr pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("soak: parse DSN: %w", err)
	}
	cfg.MaxConns = maxConns
	if tr != nil {
		cfg.ConnConfig.Tracer = tr
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("soak: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("soak: connect: %w", err)
	}
	return pool, nil
}

// Run runs the soak described by o and returns its figures. An error is
// returned only when the soak could not run; a loss or a duplicate is in
// the Result (ExactlyOnce).
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if o.Duration <= 0 || o.Rate <= 0 || o.DSN == "" {
		return nil, errors.New("soak: Options.DSN, Duration and Rate are required")
	}
	total := int(o.Duration.Seconds() * float64(o.Rate))
	cnt := &counter{}
	prodPool, err := newPool(ctx, o.DSN, int32(o.Producers), cnt)
	if err != nil {
		return nil, err
	}
	defer prodPool.Close()
	relayPool, err := newPool(ctx, o.DSN, int32(4*o.Relays), cnt)
	if err != nil {
		return nil, err
	}
	defer relayPool.Close()
	statPool, err := newPool(ctx, o.DSN, 2, nil)
	if err != nil {
		return nil, err
	}
	defer statPool.Close()

	d, err := postgres.New(oncebox.TablesConfig{})
	if err != nil {
		return nil, err
	}
	if err := migrate.Migrate(ctx, wsql.BeginnerFromPgx(relayPool), d); err != nil {
		return nil, fmt.Errorf("soak: migrate: %w", err)
	}
	table := d.Tables().Events

	l := newLedger(total)
	out := &sink{l: l}
	relayCtx, stopRelays := context.WithCancel(context.Background())
	defer stopRelays()
	var pollers []*poller.Poller
	errc := make(chan error, o.Relays)
	closeRelays := func() error {
		var errs []error
		for _, p := range pollers {
			errs = append(errs, p.Close())
		}
		for range pollers {
			errs = append(errs, <-errc)
		}
		pollers = nil
		return errors.Join(errs...)
	}
	defer func() { _ = closeRelays() }()
	for i := range o.Relays {
		cfg := poller.Config{Dialect: d, InstanceID: fmt.Sprintf("soak-%d", i),
			CleanUp: poller.Schedule{Min: o.CleanUpEvery, Max: o.CleanUpEvery, Multiplier: 1},
			Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{StrictEventTypes: true,
				Events:  map[string]oncebox.EventSettings{eventType: {}},
				CleanUp: oncebox.CleanUpConfig{TTL: o.CleanUpTTL}}}}
		p, err := poller.New(wsql.BeginnerFromPgx(relayPool), out, cfg, watermill.NopLogger{})
		if err != nil {
			return nil, fmt.Errorf("soak: poller: %w", err)
		}
		pollers = append(pollers, p)
		go func() { errc <- p.Run(relayCtx) }()
		select {
		case <-p.Running():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}

	// The sampler.
	start := time.Now()
	var (
		mu      sync.Mutex
		samples []Sample
	)
	prevStmts := cnt.n.Load()
	prevX, err := xacts(ctx, statPool)
	if err != nil {
		return nil, err
	}
	sample := func(i int) {
		s := Sample{Index: i, At: time.Since(start)}
		s.Statements = cnt.n.Load() - prevStmts
		prevStmts += s.Statements
		if x, err := xacts(ctx, statPool); err == nil {
			s.Xacts = x - prevX
			prevX = x
		}
		_ = statPool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass), pg_indexes_size($1::regclass),
			pg_total_relation_size($1::regclass), n_live_tup, n_dead_tup, autovacuum_count
			FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).
			Scan(&s.TableBytes, &s.IndexBytes, &s.TotalBytes, &s.Live, &s.Dead, &s.AutoVacuums)
		s.Load1 = load1()
		s.CommittedSoFar = committedSoFar.Load()
		s.DeliveredSoFar = out.received.Load()
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
		if o.Progress != nil {
			o.Progress(s)
		}
	}
	sampleDone := make(chan struct{})
	samplerCtx, stopSampler := context.WithCancel(ctx)
	go func() {
		defer close(sampleDone)
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		for i := 1; ; i++ {
			select {
			case <-t.C:
				sample(i)
			case <-samplerCtx.Done():
				return
			}
		}
	}()

	// The producers: a token per event on the schedule start + i/rate.
	tokens := make(chan int, o.Producers)
	var wg sync.WaitGroup
	var prodErr atomic.Pointer[error]
	for range o.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range tokens {
				if err := produce(ctx, prodPool, d, seq, l); err != nil && ctx.Err() == nil {
					prodErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	period := float64(time.Second) / float64(o.Rate)
	timer := time.NewTimer(0)
pace:
	for i := range total {
		// A machine that cannot keep the rate falls behind the schedule:
		// the run still ends at Duration, with fewer events (Result.Rate).
		if time.Since(start) >= o.Duration {
			break
		}
		timer.Reset(time.Until(start.Add(time.Duration(float64(i) * period))))
		select {
		case <-timer.C:
		case <-ctx.Done():
			break pace
		}
		tokens <- i
	}
	timer.Stop()
	close(tokens)
	wg.Wait()
	elapsed := time.Since(start)
	// The last interval, if a partial one remains, is sampled now.
	stopSampler()
	<-sampleDone
	if rem := elapsed - time.Duration(len(samples))*o.Interval; rem > o.Interval/10 {
		sample(len(samples) + 1)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	res := &Result{Elapsed: elapsed}
	for i := range total {
		if l.committed[i].Load() {
			res.Committed++
		}
	}
	res.Rate = float64(res.Committed) / elapsed.Seconds()
	// Wait for the relays to deliver what is left.
	deadline := time.Now().Add(o.Drain)
	for out.received.Load() < int64(res.Committed) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	// One more clean-up window so that the final size is after a clean-up.
	if o.CleanUpTTL+o.CleanUpEvery < o.Drain {
		wait := time.Until(start.Add(elapsed + o.CleanUpTTL + 2*o.CleanUpEvery))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	relayErr := closeRelays()
	_ = statPool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE status <> 'PROCESSED'`).Scan(&res.Left)
	_ = statPool.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, table).Scan(&res.FinalTotalBytes)

	// The ledger: per interval latencies, and exactly once.
	per := make([][]time.Duration, len(samples))
	var all []time.Duration
	for i := range total {
		if !l.committed[i].Load() {
			if l.delivered[i].Load() > 0 {
				// Delivered though its commit failed on our side: the
				// commit's answer was lost; it is committed all the same.
				res.Committed++
			} else {
				continue
			}
		}
		n := l.delivered[i].Load()
		if n == 0 {
			res.Lost++
			continue
		}
		res.Delivered++
		res.Duplicates += int(n - 1)
		lat := time.Duration(l.latency[i].Load())
		all = append(all, lat)
		k := int(time.Duration(l.stamp[i].Load()-start.UnixNano()) / o.Interval)
		if k >= 0 && k < len(per) {
			per[k] = append(per[k], lat)
		}
	}
	slices.Sort(all)
	res.P50, res.P99 = percentile(all, 0.50), percentile(all, 0.99)
	for i := range samples {
		slices.Sort(per[i])
		samples[i].Committed = len(per[i])
		samples[i].P50, samples[i].P99 = percentile(per[i], 0.50), percentile(per[i], 0.99)
	}
	res.Samples = samples
	var errs []error
	if p := prodErr.Load(); p != nil {
		errs = append(errs, fmt.Errorf("soak: a producer failed: %w", *p))
	}
	if b := out.bad.Load(); b > 0 {
		errs = append(errs, fmt.Errorf("soak: %d messages without a valid %s or %s", b, seqKey, stampKey))
	}
	if relayErr != nil && !errors.Is(relayErr, context.Canceled) {
		errs = append(errs, fmt.Errorf("soak: relays: %w", relayErr))
	}
	return res, errors.Join(errs...)
}

// produce commits event seq in one business transaction through oncebox's
// publisher, stamped just before the write.
func produce(ctx context.Context, pool *pgxpool.Pool, d *postgres.Dialect, seq int, l *ledger) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: d}, watermill.NopLogger{})
		if err != nil {
			return err
		}
		msg := message.NewMessage(watermill.NewUUID(), payload)
		at := time.Now().UnixNano()
		l.stamp[seq].Store(at)
		msg.Metadata.Set(seqKey, strconv.Itoa(seq))
		msg.Metadata.Set(stampKey, strconv.FormatInt(at, 10))
		return pub.Publish(eventType, msg)
	})
	if err == nil {
		l.committed[seq].Store(true)
		committedSoFar.Add(1)
	}
	return err
}

// committedSoFar counts the commits of every Run in the process, for the
// progress lines.
var committedSoFar atomic.Int64

// payload is a small order-like JSON body.
var payload = []byte(`{"order_id":"8d5f5a8e-6a43-4f7e-9b0e-2f1f5c3b2a10","customer":"c-1042","total":"129.90","currency":"EUR","lines":3}`)

func xacts(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var x int64
	err := pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x)
	return x, err
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// percentile returns the nearest-rank p-quantile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// Table renders the samples and the summary as Markdown.
func (r *Result) Table() string {
	var b strings.Builder
	b.WriteString("| min | events | p50 ms | p99 ms | table MB | indexes MB | total MB | live | dead | autovacuums | stmts/event | xacts/event | load1 |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Samples {
		xe := 0.0
		if s.Committed > 0 {
			xe = float64(s.Xacts) / float64(s.Committed)
		}
		fmt.Fprintf(&b, "| %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %d | %d | %.2f | %.2f | %.2f |\n",
			s.Index, s.Committed, ms(s.P50), ms(s.P99), mb(s.TableBytes), mb(s.IndexBytes), mb(s.TotalBytes),
			s.Live, s.Dead, s.AutoVacuums, s.StatementsPerEvent(), xe, s.Load1)
	}
	fmt.Fprintf(&b, "\ncommitted %d in %s (%.0f events/s); delivered %d distinct, %d duplicates, %d lost; %d rows not PROCESSED at the end; p50 %.1f ms, p99 %.1f ms overall; outbox total %.1f MB after the drain\n",
		r.Committed, r.Elapsed.Round(time.Second), r.Rate, r.Delivered, r.Duplicates, r.Lost, r.Left, ms(r.P50), ms(r.P99), mb(r.FinalTotalBytes))
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(n int64) float64         { return float64(n) / (1 << 20) }
