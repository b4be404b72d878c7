package dlq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// sent is one message a recorder was given.
type sent struct {
	topic string
	msg   *message.Message
}

// recorder is a message.Publisher that records what it was given.
type recorder struct {
	mu   sync.Mutex
	sent []sent
}

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		r.sent = append(r.sent, sent{topic: topic, msg: m})
	}
	return nil
}

func (r *recorder) Close() error { return nil }

// byID returns the messages sent, by oncebox_event_id.
func (r *recorder) byID() map[string][]sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]sent{}
	for _, s := range r.sent {
		id := s.msg.Metadata.Get(oncebox.HeaderEventID)
		out[id] = append(out[id], s)
	}
	return out
}

// jobHooks records the poller's job runs.
type jobHooks struct {
	poller.NopHooks
	mu   sync.Mutex
	jobs []poller.JobInfo
}

func (h *jobHooks) JobDone(j poller.JobInfo) { h.mu.Lock(); h.jobs = append(h.jobs, j); h.mu.Unlock() }

func (h *jobHooks) runs(job string) (ran, skipped, rows int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range h.jobs {
		if j.Job != job || j.Err != nil {
			continue
		}
		if j.Skipped {
			skipped++
		} else {
			ran++
			rows += j.Rows
		}
	}
	return
}

// waitersPerPoller is the goroutines of a poller with one event type and the
// DLQ enabled that wait on the clock when idle: the poll loop, recovery,
// clean-up, DLQ transfer, DLQ retry and DLQ clean-up.
const waitersPerPoller = 6

// startPoller runs a poller of "order-created" with the DLQ enabled until the
// test ends.
func (f *fixture) startPoller(t *testing.T, pub message.Publisher, name string, h poller.Hooks, adjust func(*poller.Config)) {
	t.Helper()
	cfg := poller.Config{Dialect: f.schema.Dialect, EventTypes: []string{"order-created"}, Clock: f.clock,
		InstanceID: name, Hooks: h}
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	if adjust != nil {
		adjust(&cfg)
	}
	p, err := poller.New(f.schema.Beginner, pub, nil, cfg)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})
}

// stepUntil advances the fake clock by step whenever waiters goroutines wait
// on it, until cond holds or budget of simulated time is spent.
func stepUntil(t *testing.T, clock *clockwork.FakeClock, waiters int, step, budget time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var spent time.Duration
	for {
		require.NoError(t, clock.BlockUntilContext(ctx, waiters), "waiting for %d goroutines to wait on the clock", waiters)
		if cond() {
			return
		}
		require.Less(t, spent, budget, "condition not met after %s of simulated time", budget)
		clock.Advance(step)
		spent += step
	}
}

// publishAndFail publishes n events of "order-created" and moves them to the
// DLQ as the relay does after their retries ran out. It returns their ids.
func (f *fixture) publishAndFail(t *testing.T, n int) []oncebox.EventID {
	t.Helper()
	ctx := context.Background()
	tx, err := f.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: f.schema.Dialect, Clock: f.clock}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
		oncebox.SetKey(msgs[i], "k")
	}
	require.NoError(t, pub.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit(ctx))
	events := f.schema.Dialect.Tables().Events
	_, err = f.schema.Pool.Exec(ctx, "UPDATE "+events+" SET status = 'FAILED', retry_count = 4, last_error = 'no'")
	require.NoError(t, err)
	q := f.schema.Dialect.EventsMoveToDLQ(f.clock.Now(), 10_000)
	_, err = f.schema.Pool.Exec(ctx, q.SQL, q.Args...)
	require.NoError(t, err)
	require.Zero(t, f.schema.Count(t, events, ""))
	ids := make([]oncebox.EventID, n)
	for i, m := range msgs {
		ids[i], err = oncebox.EventIDOf(m)
		require.NoError(t, err)
	}
	return ids
}

func TestRetriedPublisherRowIsPublishedWithItsEventID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	ids := f.publishAndFail(t, 2)
	rec := &recorder{}
	f.startPoller(t, rec, "A", nil, nil)

	require.NoError(t, f.store.SetStatus(ctx, ids[0], oncebox.DLQStatusToRetry))
	stepUntil(t, f.clock, waitersPerPoller, time.Second, 5*time.Minute, func() bool { return len(rec.byID()) == 1 })

	got := rec.byID()[ids[0].String()]
	require.Len(t, got, 1)
	require.Equal(t, "order-created", got[0].topic)
	require.Equal(t, "order-created", got[0].msg.Metadata.Get(oncebox.HeaderEventType))
	require.Equal(t, "k", oncebox.Key(got[0].msg))
	require.Equal(t, []byte(`{"n":1}`), []byte(got[0].msg.Payload))

	_, err := f.store.Get(ctx, ids[0])
	require.ErrorIs(t, err, dlq.ErrNotFound, "gone from the DLQ")
	require.Equal(t, oncebox.DLQStatusMoved, f.status(t, ids[1]), "the other row stays")
	events := f.schema.Dialect.Tables().Events
	require.Equal(t, 1, f.schema.Count(t, events, "id = $1 AND status = 'PROCESSED' AND retry_count = 0 AND last_error IS NULL", ids[0].String()))
}

func TestRetriedConsumerRowGoesBackToItsTopic(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	d := f.schema.Dialect
	withID, err := oncebox.NewEventID()
	require.NoError(t, err)
	rows := []dialects.DLQRow{
		{EventID: &withID, HandlerName: "ship", EventType: "order-created", Topic: "orders-in", Key: "k1",
			MessageUUID: "m1", Payload: []byte("one"), Metadata: `{"oncebox_event_id":"` + withID.String() + `","x":"1"}`, Error: "bad", FailedAt: f.clock.Now()},
		{HandlerName: "ship", EventType: "order-created", Topic: "orders-in", MessageUUID: "m2",
			Payload: []byte("two"), Metadata: `{"x":"2"}`, Error: "bad", FailedAt: f.clock.Now()},
	}
	var dlqIDs []oncebox.EventID
	for i := range rows {
		rows[i].ID, err = oncebox.NewEventID()
		require.NoError(t, err)
		dlqIDs = append(dlqIDs, rows[i].ID)
		q := d.DLQUpsertConsumer(rows[i])
		_, err = f.schema.Pool.Exec(ctx, q.SQL, q.Args...)
		require.NoError(t, err)
	}
	rec := &recorder{}
	f.startPoller(t, rec, "A", nil, nil)
	n, err := f.store.SetStatusWhere(ctx, dlq.Filter{Source: oncebox.DLQSourceConsumer}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	stepUntil(t, f.clock, waitersPerPoller, time.Second, 5*time.Minute, func() bool { return len(rec.byID()) == 2 })

	got := rec.byID()
	one := got[withID.String()]
	require.Len(t, one, 1, "the event id it had")
	require.Equal(t, "orders-in", one[0].topic)
	require.Equal(t, "m1", one[0].msg.UUID)
	require.Equal(t, "1", one[0].msg.Metadata.Get("x"))
	two := got[dlqIDs[1].String()]
	require.Len(t, two, 1, "without an event id, the DLQ row's own id is the event id")
	require.Equal(t, "orders-in", two[0].topic)
	require.Equal(t, "order-created", two[0].msg.Metadata.Get(oncebox.HeaderEventType))
	require.Equal(t, []byte("two"), []byte(two[0].msg.Payload))
	require.Zero(t, f.schema.Count(t, d.Tables().DLQ, ""))
}

func TestRetryReArmsAnEventAlreadyInTheOutbox(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	d := f.schema.Dialect
	// The service consumes its own event: it is in the outbox, PROCESSED,
	// and its handler parked it in the DLQ.
	tx, err := f.schema.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: d, Clock: f.clock}, nil)
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), []byte("old"))
	require.NoError(t, pub.Publish("order-created", msg))
	require.NoError(t, tx.Commit(ctx))
	eventID, err := oncebox.EventIDOf(msg)
	require.NoError(t, err)
	_, err = f.schema.Pool.Exec(ctx, "UPDATE "+d.Tables().Events+" SET status = 'PROCESSED', retry_count = 2")
	require.NoError(t, err)

	rowID, err := oncebox.NewEventID()
	require.NoError(t, err)
	q := d.DLQUpsertConsumer(dialects.DLQRow{ID: rowID, EventID: &eventID, HandlerName: "h", EventType: "order-created",
		Topic: "order-created", MessageUUID: msg.UUID, Payload: []byte("new"), Metadata: `{"oncebox_event_id":"` + eventID.String() + `"}`,
		Error: "bad", FailedAt: f.clock.Now()})
	_, err = f.schema.Pool.Exec(ctx, q.SQL, q.Args...)
	require.NoError(t, err)
	require.NoError(t, f.store.SetStatus(ctx, rowID, oncebox.DLQStatusToRetry))

	rec := &recorder{}
	f.startPoller(t, rec, "A", nil, nil)
	stepUntil(t, f.clock, waitersPerPoller, time.Second, 5*time.Minute, func() bool { return len(rec.byID()) == 1 })
	got := rec.byID()[eventID.String()]
	require.Len(t, got, 1)
	require.Equal(t, []byte("new"), []byte(got[0].msg.Payload), "the DLQ row's content")
	require.Zero(t, f.schema.Count(t, d.Tables().DLQ, ""), "the DLQ row is not lost: it moved")
	require.Equal(t, 1, f.schema.Count(t, d.Tables().Events, "id = $1 AND status = 'PROCESSED' AND retry_count = 0", eventID.String()))
}

func TestTwoPollersMoveEachRowOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	ids := f.publishAndFail(t, 300)
	n, err := f.store.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 300, n)

	rec := &recorder{}
	hs := []*jobHooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		f.startPoller(t, rec, name, hs[i], func(c *poller.Config) { c.JobBatchSize = 7 })
	}
	stepUntil(t, f.clock, 2*waitersPerPoller, time.Second, 10*time.Minute, func() bool { return len(rec.byID()) == 300 })
	moved := 0
	for _, h := range hs {
		_, _, rows := h.runs(poller.JobDLQRetry)
		moved += rows
	}
	require.Equal(t, 300, moved, "each row moved once")
	got := rec.byID()
	for _, id := range ids {
		require.Len(t, got[id.String()], 1, id)
	}
	require.Zero(t, f.schema.Count(t, f.schema.Dialect.Tables().DLQ, ""))
}

func TestConcurrentTransfersTakeDisjointRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.publishAndFail(t, 500)
	_, err := f.store.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Go(func() {
			for {
				q := f.schema.Dialect.DLQTransferToOutbox(t0, 9)
				tag, err := f.schema.Pool.Exec(ctx, q.SQL, q.Args...)
				if !assertNoError(t, err) || tag.RowsAffected() == 0 {
					return
				}
				mu.Lock()
				total += int(tag.RowsAffected())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 500, total)
	events := f.schema.Dialect.Tables().Events
	require.Equal(t, 500, f.schema.Count(t, events, "status = 'PENDING' AND retry_count = 0 AND next_retry_at = $1", t0))
	require.Equal(t, 500, f.schema.Count(t, events, "updated_at = $1", t0), "each inserted once, never re-armed")
	require.Zero(t, f.schema.Count(t, f.schema.Dialect.Tables().DLQ, ""))
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestResolvedRowsAreCleanedUpAfterTheTTLUnderTheLease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	table := f.schema.Dialect.Tables().DLQ
	var old []oncebox.EventID
	for range 5 {
		old = append(old, f.insert(t, row{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-3 * time.Hour)}))
	}
	young := f.insert(t, row{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-30 * time.Minute)})
	oldMoved := f.insert(t, row{status: oncebox.DLQStatusMoved, movedAt: t0.Add(-3 * time.Hour)})
	// Moved long ago but resolved recently: the ttl counts from the resolution.
	late := f.insert(t, row{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-3 * time.Hour)})
	_, err := f.schema.Pool.Exec(ctx, "UPDATE "+table+" SET updated_at = $1 WHERE id = $2", t0.Add(-10*time.Minute), late.String())
	require.NoError(t, err)

	hs := []*jobHooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		f.startPoller(t, &recorder{}, name, hs[i], func(c *poller.Config) {
			c.Oncebox.Outbox.DLQ.CleanUp.TTL = time.Hour
			c.Oncebox.Outbox.DLQ.CleanUp.BatchSize = 2 // several statements
		})
	}
	runs := func() (ran, skipped, rows int) {
		for _, h := range hs {
			r, s, n := h.runs(poller.JobDLQCleanUp)
			ran, skipped, rows = ran+r, skipped+s, rows+n
		}
		return
	}
	stepUntil(t, f.clock, 2*waitersPerPoller, time.Second, 10*time.Minute, func() bool { r, s, _ := runs(); return r+s >= 2 })
	ran, skipped, rows := runs()
	require.Equal(t, 1, ran, "one instance ran the clean-up")
	require.Equal(t, 1, skipped, "the other found the lease taken")
	require.Equal(t, 5, rows)
	for _, id := range old {
		_, err := f.store.Get(ctx, id)
		require.ErrorIs(t, err, dlq.ErrNotFound)
	}
	for _, id := range []oncebox.EventID{young, oldMoved, late} {
		_, err := f.store.Get(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, 1, f.schema.Count(t, f.schema.Dialect.Tables().Jobs, "name = 'dlq-clean-up'"))
}
