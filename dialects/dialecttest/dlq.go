package dialecttest

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// dlqRow describes a DLQ row to insert.
type dlqRow struct {
	status    oncebox.DLQStatus
	source    oncebox.DLQSource
	eventType string
	movedAt   time.Time
	noEventID bool
	err       string // default "boom"
}

// insertDLQ writes r through the dialect's own upsert, then sets its side,
// status and times, and returns its id.
func (s *suite) insertDLQ(t *testing.T, r dlqRow) oncebox.EventID {
	t.Helper()
	id := newID(t)
	if r.status == "" {
		r.status = oncebox.DLQStatusMoved
	}
	if r.source == "" {
		r.source = oncebox.DLQSourcePublisher
	}
	if r.eventType == "" {
		r.eventType = "order-created"
	}
	if r.movedAt.IsZero() {
		r.movedAt = t0.Add(-time.Hour)
	}
	row := dialects.DLQRow{ID: id, EventID: &id, EventType: r.eventType, Topic: r.eventType + "-topic", Key: "k1",
		MessageUUID: "msg-" + id.String(), Payload: []byte(`{"n":1}`), Metadata: `{"a":"b"}`,
		Error: cmp.Or(r.err, "boom"), FailedAt: r.movedAt.Add(-time.Minute)}
	if r.noEventID {
		row.EventID = nil
	}
	if r.source == oncebox.DLQSourceConsumer {
		row.HandlerName = "ship"
	}
	require.NoError(t, s.Dialect.PoisonUpsert(context.Background(), s.Beginner, row))
	require.Equal(t, int64(1), s.exec(t, "UPDATE "+s.Tables.DLQ+" SET source = "+s.P(1)+", status = "+s.P(2)+
		", retry_count = 4, last_failed_at = "+s.P(3)+", moved_at = "+s.P(4)+", updated_at = "+s.P(5)+" WHERE id = "+s.P(6),
		string(r.source), string(r.status), r.movedAt, r.movedAt, r.movedAt, s.ID(id)))
	return id
}

func (s *suite) store(t *testing.T) *dlq.Store {
	t.Helper()
	st, err := dlq.NewStore(s.Beginner, dlq.Config{Dialect: s.Dialect, Clock: s.clock})
	require.NoError(t, err)
	return st
}

// failAll marks every outbox row FAILED after four attempts.
func (s *suite) failAll(t *testing.T) {
	t.Helper()
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'FAILED', retry_count = 4, last_error = "+s.P(1), "no")
}

// moveAll moves every FAILED row to the DLQ.
func (s *suite) moveAll(t *testing.T) int {
	t.Helper()
	n, err := s.Dialect.MoveToDLQ(context.Background(), s.Beginner, s.clock.Now(), 10_000)
	require.NoError(t, err)
	return n
}

// The outbox → DLQ transfer and back, and their races.
func testDLQTransfer(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	st := s.store(t)

	t.Run("FAILED rows move to the DLQ with their history, others stay", func(t *testing.T) {
		ids := s.publish(t, s.clock, "order-created", 3)
		s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'FAILED', retry_count = 4, last_error = "+s.P(1)+
			", first_failed_at = "+s.P(2)+" WHERE id <> "+s.P(3), "no", t0.Add(-time.Minute), s.ID(ids[2]))
		s.clock.Advance(time.Second)
		require.Equal(t, 2, s.moveAll(t))
		require.Equal(t, 1, s.Count(t, s.Tables.Events, ""), "the PENDING row stays")
		r, err := st.Get(ctx, ids[0])
		require.NoError(t, err)
		require.Equal(t, ids[0], *r.EventID, "the DLQ row's id is the event id")
		require.Equal(t, oncebox.DLQSourcePublisher, r.Source)
		require.Equal(t, oncebox.DLQStatusMoved, r.Status)
		require.Equal(t, 4, r.RetryCount)
		require.Equal(t, "no", r.LastError)
		require.Equal(t, "order-created", r.EventType)
		require.Equal(t, "order-created", r.Topic)
		require.Equal(t, "k", r.Key)
		require.Equal(t, []byte(`{"n":1}`), r.Payload)
		require.Equal(t, ids[0].String(), r.Metadata[oncebox.HeaderEventID])
		require.Equal(t, t0, r.CreatedAt)
		require.Equal(t, t0.Add(-time.Minute), *r.FirstFailedAt)
		require.Equal(t, t0.Add(time.Second), r.MovedAt)
		require.Zero(t, s.moveAll(t), "nothing left to move")
		s.exec(t, "DELETE FROM "+s.Tables.Events)
		s.exec(t, "DELETE FROM "+s.Tables.DLQ)
	})

	t.Run("concurrent moves and transfers take each row once", func(t *testing.T) {
		s.publish(t, s.clock, "order-created", 500)
		s.failAll(t)
		// Eight instances race: no error (on MySQL: no deadlock), and
		// each row moves once.
		race := func(name string, op func() (int, error)) int {
			var wg sync.WaitGroup
			var mu sync.Mutex
			total := 0
			for range 8 {
				wg.Go(func() {
					for {
						n, err := op()
						if err != nil {
							t.Errorf("%s: %v", name, err)
							return
						}
						if n == 0 {
							return
						}
						mu.Lock()
						total += n
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			return total
		}
		now := s.clock.Now()
		require.Equal(t, 500, race("MoveToDLQ", func() (int, error) { return s.Dialect.MoveToDLQ(ctx, s.Beginner, now, 9) }))
		require.Zero(t, s.Count(t, s.Tables.Events, ""))
		require.Equal(t, 500, s.Count(t, s.Tables.DLQ, "status = 'MOVED'"))

		n, err := st.SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
		require.NoError(t, err)
		require.Equal(t, 500, n)
		later := t0.Add(time.Hour)
		require.Equal(t, 500, race("TransferDLQToOutbox", func() (int, error) { return s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, later, 9) }))
		require.Equal(t, 500, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0 AND next_retry_at = "+s.P(1)+
			" AND updated_at = "+s.P(2), later, later), "each inserted once, due now")
		require.Zero(t, s.Count(t, s.Tables.DLQ, ""))
		s.exec(t, "DELETE FROM "+s.Tables.Events)
	})

	t.Run("TO_RETRY rows only go back, with the same event id", func(t *testing.T) {
		ids := s.publish(t, s.clock, "order-created", 2)
		s.failAll(t)
		require.Equal(t, 2, s.moveAll(t))
		require.NoError(t, st.SetStatus(ctx, ids[0], oncebox.DLQStatusToRetry))
		now := t0.Add(2 * time.Hour)
		n, err := s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, now, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND status = 'PENDING' AND retry_count = 0 AND last_error IS NULL AND next_retry_at = "+s.P(2),
			s.ID(ids[0]), now))
		_, err = st.Get(ctx, ids[0])
		require.ErrorIs(t, err, dlq.ErrNotFound)
		r, err := st.Get(ctx, ids[1])
		require.NoError(t, err)
		require.Equal(t, oncebox.DLQStatusMoved, r.Status, "the MOVED row stays")
		s.exec(t, "DELETE FROM "+s.Tables.Events)
		s.exec(t, "DELETE FROM "+s.Tables.DLQ)
	})

	t.Run("an event id already in the outbox is re-armed", func(t *testing.T) {
		// The service consumes its own event: it is in the outbox,
		// PROCESSED, and its handler parked it in the DLQ.
		ids := s.publish(t, s.clock, "own-event", 1)
		s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED', retry_count = 2, last_error = 'x'")
		rowID := newID(t)
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, dialects.DLQRow{ID: rowID, EventID: &ids[0], HandlerName: "h", EventType: "own-event",
			Topic: "own-event", MessageUUID: "m", Payload: []byte("new"), Metadata: `{"oncebox_event_id":"` + ids[0].String() + `"}`,
			Error: "bad", FailedAt: t0}))
		require.NoError(t, st.SetStatus(ctx, rowID, oncebox.DLQStatusToRetry))
		now := t0.Add(3 * time.Hour)
		n, err := s.Dialect.TransferDLQToOutbox(ctx, s.Beginner, now, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, s.Count(t, s.Tables.Events, ""), "re-armed, not inserted twice")
		e := s.stored(t, ids[0])
		require.Equal(t, "PENDING", e.Status)
		require.Zero(t, e.RetryCount)
		require.Equal(t, []byte("new"), e.Payload, "the DLQ row's content")
		require.True(t, e.NextRetryAt.Equal(now))
		require.Zero(t, s.Count(t, s.Tables.DLQ, ""), "the DLQ row moved")
		s.exec(t, "DELETE FROM "+s.Tables.Events)
	})
}

// Through two pollers: consumer rows, with and without an event id, go back
// to the topic they were consumed from, each once.
func testDLQRetryThroughPollers(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	withID := newID(t)
	var dlqIDs []oncebox.EventID
	for _, r := range []dialects.DLQRow{
		{EventID: &withID, HandlerName: "ship", EventType: "order-created", Topic: "orders-in", Key: "k1",
			MessageUUID: "m1", Payload: []byte("one"), Metadata: `{"oncebox_event_id":"` + withID.String() + `","x":"1"}`, Error: "bad", FailedAt: t0},
		{HandlerName: "ship", EventType: "order-created", Topic: "orders-in", MessageUUID: "m2",
			Payload: []byte("two"), Metadata: `{"x":"2"}`, Error: "bad", FailedAt: t0},
	} {
		r.ID = newID(t)
		dlqIDs = append(dlqIDs, r.ID)
		require.NoError(t, s.Dialect.PoisonUpsert(ctx, s.Beginner, r))
	}
	// And many publisher rows.
	tx := s.begin(t)
	pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: s.Dialect, Clock: s.clock}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, 100)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
		oncebox.SetKey(msgs[i], "k")
	}
	require.NoError(t, pub.Publish("order-created", msgs...))
	require.NoError(t, tx.Commit())
	s.failAll(t)
	require.Equal(t, 100, s.moveAll(t))
	n, err := s.store(t).SetStatusWhere(ctx, dlq.Filter{}, oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	require.Equal(t, 102, n)

	rec := newRecorder()
	hs := []*hooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		cfg := s.pollerConfig("order-created")
		cfg.InstanceID, cfg.Hooks, cfg.JobBatchSize = name, hs[i], 7
		cfg.Oncebox.Outbox.DLQ.Enabled = true
		s.startPoller(t, nil, rec, cfg)
	}
	stepUntil(t, s.clock, 2*waitersPerPollerDLQ, time.Second, 10*time.Minute, func() bool { return rec.delivered() == 102 })
	_, _, moved := runs(t, poller.JobDLQRetry, hs...)
	require.Equal(t, 102, moved, "each row moved once")
	for _, m := range msgs {
		id, err := oncebox.EventIDOf(m)
		require.NoError(t, err)
		got := rec.of(id)
		require.Len(t, got, 1)
		require.Equal(t, "order-created", got[0].topic)
		require.Equal(t, []byte(m.Payload), []byte(got[0].msg.Payload))
		require.Equal(t, "k", oncebox.Key(got[0].msg), "the ordering key survives the round trip")
		require.Equal(t, "order-created", got[0].msg.Metadata.Get(oncebox.HeaderEventType))
		require.Equal(t, m.UUID, got[0].msg.UUID)
	}
	one := rec.of(withID)
	require.Len(t, one, 1, "the event id it had")
	require.Equal(t, "orders-in", one[0].topic)
	require.Equal(t, "m1", one[0].msg.UUID)
	require.Equal(t, "1", one[0].msg.Metadata.Get("x"))
	two := rec.of(dlqIDs[1])
	require.Len(t, two, 1, "without an event id, the DLQ row's own id is the event id")
	require.Equal(t, "orders-in", two[0].topic)
	require.Equal(t, "order-created", two[0].msg.Metadata.Get(oncebox.HeaderEventType))
	require.Equal(t, []byte("two"), []byte(two[0].msg.Payload))
	require.Zero(t, s.Count(t, s.Tables.DLQ, ""))
	eventually(t, "all PROCESSED", func() bool { return s.status(t, "PROCESSED") == 102 })
}
