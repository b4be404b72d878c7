package dialecttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

var allStatuses = []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry,
	oncebox.DLQStatusInProcess, oncebox.DLQStatusResolved}

func testDLQStoreGet(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	id := s.insertDLQ(t, dlqRow{})
	r, err := st.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, r.ID)
	require.NotNil(t, r.EventID)
	require.Equal(t, id, *r.EventID)
	require.Equal(t, oncebox.DLQSourcePublisher, r.Source)
	require.Equal(t, "", r.HandlerName)
	require.Equal(t, "order-created", r.EventType)
	require.Equal(t, "order-created-topic", r.Topic)
	require.Equal(t, "k1", r.Key)
	require.Equal(t, "msg-"+id.String(), r.MessageUUID)
	require.Equal(t, []byte(`{"n":1}`), r.Payload)
	// A publisher row's metadata holds neither the event id nor the type
	// (the outbox row kept them in its columns): the store shows them, as
	// the relay sent them.
	require.Equal(t, map[string]string{"oncebox_event_id": id.String(), "oncebox_event_type": "order-created", "a": "b"}, r.Metadata)
	require.Equal(t, oncebox.DLQStatusMoved, r.Status)
	require.Equal(t, 4, r.RetryCount)
	require.Equal(t, "boom", r.LastError)
	moved := t0.Add(-time.Hour)
	require.Equal(t, moved.Add(-time.Minute), r.CreatedAt)
	require.Equal(t, moved.Add(-time.Minute), *r.FirstFailedAt)
	require.Equal(t, moved, *r.LastFailedAt)
	require.Equal(t, moved, r.MovedAt)
	require.Equal(t, moved, r.UpdatedAt)
	require.Equal(t, time.UTC, r.MovedAt.Location())

	noID := s.insertDLQ(t, dlqRow{noEventID: true, source: oncebox.DLQSourceConsumer})
	r, err = st.Get(ctx, noID)
	require.NoError(t, err)
	require.Nil(t, r.EventID)
	require.Equal(t, oncebox.DLQSourceConsumer, r.Source)
	require.Equal(t, "ship", r.HandlerName)

	missing := newID(t)
	_, err = st.Get(ctx, missing)
	require.ErrorIs(t, err, dlq.ErrNotFound)
	require.ErrorContains(t, err, missing.String())
}

// Every from/to pair on a single row, on a list of ids and on a filter;
// IN_PROCESS rows are never changed.
func testDLQStoreSetStatusTransitions(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	status := func(id oncebox.EventID) oncebox.DLQStatus {
		r, err := st.Get(ctx, id)
		require.NoError(t, err)
		return r.Status
	}
	allowed := map[[2]oncebox.DLQStatus]bool{
		{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry}:    true,
		{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved}:   true,
		{oncebox.DLQStatusToRetry, oncebox.DLQStatusMoved}:    true,
		{oncebox.DLQStatusToRetry, oncebox.DLQStatusResolved}: true,
		{oncebox.DLQStatusResolved, oncebox.DLQStatusToRetry}: true,
		{oncebox.DLQStatusResolved, oncebox.DLQStatusMoved}:   true,
	}
	for _, from := range allStatuses {
		for _, to := range allStatuses {
			name := fmt.Sprintf("%s->%s", from, to)
			want := allowed[[2]oncebox.DLQStatus{from, to}]
			require.Equal(t, want, dlq.Allowed(from, to), name)

			s.clock.Advance(time.Second)
			id := s.insertDLQ(t, dlqRow{status: from})
			err := st.SetStatus(ctx, id, to)
			got, gerr := st.Get(ctx, id)
			require.NoError(t, gerr)
			switch {
			case to == oncebox.DLQStatusInProcess:
				require.ErrorIs(t, err, dlq.ErrInvalidTransition, name)
				require.Equal(t, from, got.Status, name)
			case from == oncebox.DLQStatusInProcess:
				require.ErrorIs(t, err, dlq.ErrInProcess, name)
				require.ErrorContains(t, err, id.String(), name)
				require.Equal(t, from, got.Status, name)
			case from == to:
				require.NoError(t, err, "%s: a no-op", name)
				require.Equal(t, t0.Add(-time.Hour), got.UpdatedAt, "%s: not touched", name)
			case want:
				require.NoError(t, err, name)
				require.Equal(t, to, got.Status, name)
				require.Equal(t, s.clock.Now(), got.UpdatedAt, name)
			default:
				var te *dlq.TransitionError
				require.ErrorAs(t, err, &te, name)
				require.Equal(t, dlq.TransitionError{ID: id, From: from, To: to}, *te, name)
				require.Equal(t, from, got.Status, name)
			}

			ids := []oncebox.EventID{s.insertDLQ(t, dlqRow{status: from, eventType: name}), s.insertDLQ(t, dlqRow{status: from, eventType: name})}
			n, err := st.SetStatusMany(ctx, ids, to)
			if to == oncebox.DLQStatusInProcess {
				require.ErrorIs(t, err, dlq.ErrInvalidTransition, name)
			} else {
				require.NoError(t, err, name)
				require.Equal(t, map[bool]int{true: 2, false: 0}[want], n, name)
			}
			where := s.insertDLQ(t, dlqRow{status: from, eventType: name + "-where"})
			n, err = st.SetStatusWhere(ctx, dlq.Filter{EventType: name + "-where"}, to)
			if to == oncebox.DLQStatusInProcess {
				require.ErrorIs(t, err, dlq.ErrInvalidTransition, name)
			} else {
				require.NoError(t, err, name)
				require.Equal(t, map[bool]int{true: 1, false: 0}[want], n, name)
				wantStatus := from
				if want {
					wantStatus = to
				}
				require.Equal(t, wantStatus, status(where), name)
				require.Equal(t, wantStatus, status(ids[0]), name)
			}
		}
	}
}

// Unknown ids, more than 1,000 ids, exactly 1,000, bad statuses.
func testDLQStoreLimits(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	missing := newID(t)
	require.ErrorIs(t, st.SetStatus(ctx, missing, oncebox.DLQStatusToRetry), dlq.ErrNotFound)
	err := st.SetStatus(ctx, missing, "RETRYING")
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)

	n, err := st.SetStatusMany(ctx, make([]oncebox.EventID, 1001), oncebox.DLQStatusResolved)
	require.ErrorIs(t, err, dlq.ErrTooManyIDs)
	require.ErrorContains(t, err, "1001 ids")
	require.Zero(t, n)
	_, err = st.DeleteMany(ctx, make([]oncebox.EventID, 1001))
	require.ErrorIs(t, err, dlq.ErrTooManyIDs)

	// Exactly 1,000 ids (Oracle's IN-list limit), most unknown: fine.
	ids := make([]oncebox.EventID, 1000)
	for i := range ids {
		ids[i] = newID(t)
	}
	ids[0] = s.insertDLQ(t, dlqRow{})
	ids[999] = s.insertDLQ(t, dlqRow{})
	n, err = st.SetStatusMany(ctx, ids, oncebox.DLQStatusResolved)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.DeleteMany(ctx, ids)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = st.SetStatusMany(ctx, nil, oncebox.DLQStatusResolved)
	require.NoError(t, err)
	require.Zero(t, n)
}

func testDLQStoreDelete(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	for _, status := range []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry, oncebox.DLQStatusResolved} {
		id := s.insertDLQ(t, dlqRow{status: status})
		require.NoError(t, st.Delete(ctx, id), status)
		_, err := st.Get(ctx, id)
		require.ErrorIs(t, err, dlq.ErrNotFound, status)
		require.ErrorIs(t, st.Delete(ctx, id), dlq.ErrNotFound, "%s: deleted twice", status)
	}
	busy := s.insertDLQ(t, dlqRow{status: oncebox.DLQStatusInProcess})
	err := st.Delete(ctx, busy)
	require.ErrorIs(t, err, dlq.ErrInProcess)
	require.ErrorContains(t, err, busy.String())

	a := s.insertDLQ(t, dlqRow{eventType: "x"})
	b := s.insertDLQ(t, dlqRow{eventType: "x", status: oncebox.DLQStatusResolved})
	c := s.insertDLQ(t, dlqRow{eventType: "x", status: oncebox.DLQStatusInProcess})
	n, err := st.DeleteMany(ctx, []oncebox.EventID{a, b, c, newID(t)})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the IN_PROCESS row and the unknown id are skipped")
	require.Equal(t, 1, s.Count(t, s.Tables.DLQ, "event_type = 'x'"))

	for range 3 {
		s.insertDLQ(t, dlqRow{eventType: "y", status: oncebox.DLQStatusResolved})
	}
	s.insertDLQ(t, dlqRow{eventType: "y", status: oncebox.DLQStatusMoved})
	s.insertDLQ(t, dlqRow{eventType: "y", status: oncebox.DLQStatusInProcess})
	n, err = st.DeleteWhere(ctx, dlq.Filter{EventType: "y", Statuses: []oncebox.DLQStatus{oncebox.DLQStatusResolved, oncebox.DLQStatusInProcess}})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, 2, s.Count(t, s.Tables.DLQ, "event_type = 'y'"))
	n, err = st.DeleteWhere(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 1, n, "every row but the IN_PROCESS ones")
	require.Equal(t, 3, s.Count(t, s.Tables.DLQ, "status = 'IN_PROCESS'"))
	require.Equal(t, 3, s.Count(t, s.Tables.DLQ, ""))
}

func dlqIDs(rows []dlq.Row) []oncebox.EventID {
	out := make([]oncebox.EventID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// Keyset pagination by (moved_at, id) with ties on moved_at; filters; count.
func testDLQStoreListAndCount(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	// 25 rows moved at five instants, five each, inserted out of order.
	var want []oncebox.EventID
	byTime := map[int][]oncebox.EventID{}
	for _, k := range []int{3, 0, 4, 1, 2} {
		for range 5 {
			src := oncebox.DLQSourcePublisher
			if k%2 == 1 {
				src = oncebox.DLQSourceConsumer
			}
			byTime[k] = append(byTime[k], s.insertDLQ(t, dlqRow{movedAt: t0.Add(time.Duration(k) * time.Minute), source: src}))
		}
	}
	for k := range 5 {
		want = append(want, byTime[k]...) // UUIDv7 made in order by one process sort as made
	}

	var got []oncebox.EventID
	var after *dlq.Cursor
	pages := 0
	for {
		rows, next, err := st.List(ctx, dlq.Filter{}, dlq.Page{Limit: 7, After: after})
		require.NoError(t, err)
		pages++
		got = append(got, dlqIDs(rows)...)
		if next == nil {
			break
		}
		require.Len(t, rows, 7)
		parsed, err := dlq.ParseCursor(next.String())
		require.NoError(t, err)
		require.Equal(t, *next, parsed)
		after = &parsed
	}
	require.Equal(t, want, got)
	require.Equal(t, 4, pages, "7+7+7+4")

	rows, next, err := st.List(ctx, dlq.Filter{}, dlq.Page{Limit: 25})
	require.NoError(t, err)
	require.Len(t, rows, 25)
	require.Nil(t, next, "a page that ends at the last row says so")

	consumer := dlq.Filter{Source: oncebox.DLQSourceConsumer}
	rows, _, err = st.List(ctx, consumer, dlq.Page{})
	require.NoError(t, err)
	require.Equal(t, append(append([]oncebox.EventID{}, byTime[1]...), byTime[3]...), dlqIDs(rows))
	n, err := st.Count(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 10, n)

	window := dlq.Filter{MovedFrom: t0.Add(time.Minute), MovedTo: t0.Add(3 * time.Minute)}
	rows, _, err = st.List(ctx, window, dlq.Page{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, byTime[1][:3], dlqIDs(rows))
	n, err = st.Count(ctx, window)
	require.NoError(t, err)
	require.Equal(t, 10, n, "from inclusive, to exclusive")

	_, err = st.SetStatusMany(ctx, byTime[4][:2], oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	retry := dlq.Filter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusToRetry}, EventType: "order-created"}
	rows, next, err = st.List(ctx, retry, dlq.Page{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, byTime[4][:1], dlqIDs(rows))
	rows, next, err = st.List(ctx, retry, dlq.Page{Limit: 1, After: next})
	require.NoError(t, err)
	require.Equal(t, byTime[4][1:2], dlqIDs(rows))
	require.Nil(t, next)
	n, err = st.Count(ctx, dlq.Filter{EventType: "other"})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = st.Count(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 25, n)
}
