package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type fixture struct {
	schema *pgtest.Schema
	clock  *clockwork.FakeClock
	store  *dlq.Store
}

func setup(t *testing.T) *fixture {
	t.Helper()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(t0)
	st, err := dlq.NewStore(s.Beginner, dlq.Config{Dialect: s.Dialect, Clock: clock})
	require.NoError(t, err)
	return &fixture{schema: s, clock: clock, store: st}
}

// row describes a DLQ row to insert.
type row struct {
	status    oncebox.DLQStatus
	source    oncebox.DLQSource
	eventType string
	movedAt   time.Time
	noEventID bool
}

// insert writes r and returns its id.
func (f *fixture) insert(t *testing.T, r row) oncebox.EventID {
	t.Helper()
	id, err := oncebox.NewEventID()
	require.NoError(t, err)
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
	var eventID any = id.String()
	if r.noEventID {
		eventID = nil
	}
	_, err = f.schema.Pool.Exec(context.Background(), "INSERT INTO "+f.schema.Dialect.Tables().DLQ+
		` (id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata,
		   status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at)
		VALUES ($1, $2, $3, '', $4::text, $4::text || '-topic', 'k1', $5, '{"n":1}', $6, $7, 4, 'boom', $8, $8, $9, $9, $9)`,
		id.String(), eventID, string(r.source), r.eventType, "msg-"+id.String(),
		`{"oncebox_event_id":"`+id.String()+`","a":"b"}`, string(r.status), r.movedAt.Add(-time.Minute), r.movedAt)
	require.NoError(t, err)
	return id
}

func (f *fixture) status(t *testing.T, id oncebox.EventID) oncebox.DLQStatus {
	t.Helper()
	r, err := f.store.Get(context.Background(), id)
	require.NoError(t, err)
	return r.Status
}

func TestNewStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := dlq.NewStore(nil, dlq.Config{})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "db is nil")
	require.ErrorContains(t, err, "Config.Dialect is nil")
}

func TestGetReturnsEveryColumn(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	id := f.insert(t, row{})
	r, err := f.store.Get(ctx, id)
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
	require.Equal(t, map[string]string{"oncebox_event_id": id.String(), "a": "b"}, r.Metadata)
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

	noID := f.insert(t, row{noEventID: true, source: oncebox.DLQSourceConsumer})
	r, err = f.store.Get(ctx, noID)
	require.NoError(t, err)
	require.Nil(t, r.EventID)
	require.Equal(t, oncebox.DLQSourceConsumer, r.Source)

	missing, err := oncebox.NewEventID()
	require.NoError(t, err)
	_, err = f.store.Get(ctx, missing)
	require.ErrorIs(t, err, dlq.ErrNotFound)
	require.ErrorContains(t, err, missing.String())
}

var allStatuses = []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry,
	oncebox.DLQStatusInProcess, oncebox.DLQStatusResolved}

// TestSetStatusTransitions tries every from/to pair on a single row, on a
// list of ids and on a filter.
func TestSetStatusTransitions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
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

			// One row.
			f.clock.Advance(time.Second)
			id := f.insert(t, row{status: from})
			err := f.store.SetStatus(ctx, id, to)
			got, gerr := f.store.Get(ctx, id)
			require.NoError(t, gerr)
			switch {
			case to == oncebox.DLQStatusInProcess:
				var te *dlq.TransitionError
				require.ErrorAs(t, err, &te, name)
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
				require.Equal(t, f.clock.Now(), got.UpdatedAt, name)
			default:
				var te *dlq.TransitionError
				require.ErrorAs(t, err, &te, name)
				require.Equal(t, dlq.TransitionError{ID: id, From: from, To: to}, *te, name)
				require.ErrorContains(t, err, string(from), name)
				require.Equal(t, from, got.Status, name)
			}

			// Many and Where: refused rows are skipped, not errors, except
			// for a target no row may take.
			ids := []oncebox.EventID{f.insert(t, row{status: from, eventType: name}), f.insert(t, row{status: from, eventType: name})}
			n, err := f.store.SetStatusMany(ctx, ids, to)
			if to == oncebox.DLQStatusInProcess {
				require.ErrorIs(t, err, dlq.ErrInvalidTransition, name)
			} else {
				require.NoError(t, err, name)
				require.Equal(t, map[bool]int{true: 2, false: 0}[want], n, name)
			}
			where := f.insert(t, row{status: from, eventType: name + "-where"})
			n, err = f.store.SetStatusWhere(ctx, dlq.Filter{EventType: name + "-where"}, to)
			if to == oncebox.DLQStatusInProcess {
				require.ErrorIs(t, err, dlq.ErrInvalidTransition, name)
			} else {
				require.NoError(t, err, name)
				require.Equal(t, map[bool]int{true: 1, false: 0}[want], n, name)
				wantStatus := from
				if want {
					wantStatus = to
				}
				require.Equal(t, wantStatus, f.status(t, where), name)
				require.Equal(t, wantStatus, f.status(t, ids[0]), name)
			}
		}
	}
}

func TestSetStatusErrors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	missing, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.ErrorIs(t, f.store.SetStatus(ctx, missing, oncebox.DLQStatusToRetry), dlq.ErrNotFound)

	err = f.store.SetStatus(ctx, missing, "RETRYING")
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	require.ErrorContains(t, err, `"RETRYING"`)

	n, err := f.store.SetStatusMany(ctx, make([]oncebox.EventID, 1001), oncebox.DLQStatusResolved)
	require.ErrorIs(t, err, dlq.ErrTooManyIDs)
	require.ErrorContains(t, err, "1001 ids")
	require.Zero(t, n)
	_, err = f.store.DeleteMany(ctx, make([]oncebox.EventID, 1001))
	require.ErrorIs(t, err, dlq.ErrTooManyIDs)

	// Exactly 1,000 ids, some unknown: fine, the unknown are not counted.
	ids := make([]oncebox.EventID, 1000)
	for i := range ids {
		ids[i], err = oncebox.NewEventID()
		require.NoError(t, err)
	}
	ids[0] = f.insert(t, row{})
	n, err = f.store.SetStatusMany(ctx, ids, oncebox.DLQStatusResolved)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = f.store.SetStatusMany(ctx, nil, oncebox.DLQStatusResolved)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = f.store.SetStatusWhere(ctx, dlq.Filter{Source: "broker"}, oncebox.DLQStatusResolved)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	require.ErrorContains(t, err, "Filter.Source")
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	table := f.schema.Dialect.Tables().DLQ

	for _, st := range []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusToRetry, oncebox.DLQStatusResolved} {
		id := f.insert(t, row{status: st})
		require.NoError(t, f.store.Delete(ctx, id), st)
		_, err := f.store.Get(ctx, id)
		require.ErrorIs(t, err, dlq.ErrNotFound, st)
		require.ErrorIs(t, f.store.Delete(ctx, id), dlq.ErrNotFound, "%s: deleted twice", st)
	}
	busy := f.insert(t, row{status: oncebox.DLQStatusInProcess})
	err := f.store.Delete(ctx, busy)
	require.ErrorIs(t, err, dlq.ErrInProcess)
	require.ErrorContains(t, err, busy.String())

	a := f.insert(t, row{eventType: "x"})
	b := f.insert(t, row{eventType: "x", status: oncebox.DLQStatusResolved})
	c := f.insert(t, row{eventType: "x", status: oncebox.DLQStatusInProcess})
	missing, err := oncebox.NewEventID()
	require.NoError(t, err)
	n, err := f.store.DeleteMany(ctx, []oncebox.EventID{a, b, c, missing})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the IN_PROCESS row and the unknown id are skipped")
	require.Equal(t, 1, f.schema.Count(t, table, "event_type = 'x'"))

	for range 3 {
		f.insert(t, row{eventType: "y", status: oncebox.DLQStatusResolved})
	}
	f.insert(t, row{eventType: "y", status: oncebox.DLQStatusMoved})
	f.insert(t, row{eventType: "y", status: oncebox.DLQStatusInProcess})
	n, err = f.store.DeleteWhere(ctx, dlq.Filter{EventType: "y", Statuses: []oncebox.DLQStatus{oncebox.DLQStatusResolved, oncebox.DLQStatusInProcess}})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, 2, f.schema.Count(t, table, "event_type = 'y'"))
	n, err = f.store.DeleteWhere(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 1, n, "every row but the IN_PROCESS ones")
	require.Equal(t, 3, f.schema.Count(t, table, ""), "the three IN_PROCESS rows stay")
	require.Equal(t, 3, f.schema.Count(t, table, "status = 'IN_PROCESS'"))
}

func TestFilterValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    dlq.Filter
		want string
	}{
		{dlq.Filter{Statuses: []oncebox.DLQStatus{"MOVED", "DONE"}}, `Filter.Statuses: unknown status "DONE"`},
		{dlq.Filter{Source: "kafka"}, `Filter.Source: unknown source "kafka"`},
		{dlq.Filter{MovedFrom: t0, MovedTo: t0.Add(-time.Second)}, "Filter.MovedFrom 2026-11-30T12:00:00Z is after Filter.MovedTo"},
	} {
		err := c.f.Validate()
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		require.ErrorContains(t, err, c.want)
	}
	require.NoError(t, dlq.Filter{}.Validate())
	require.NoError(t, dlq.Filter{MovedFrom: t0, MovedTo: t0}.Validate())
}

func TestListPaginatesByMovedAtThenID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// 25 rows: moved at five instants, five rows each, so ties are broken
	// by id; inserted out of order.
	var want []oncebox.EventID
	byTime := map[int][]oncebox.EventID{}
	for _, k := range []int{3, 0, 4, 1, 2} {
		for range 5 {
			src := oncebox.DLQSourcePublisher
			if k%2 == 1 {
				src = oncebox.DLQSourceConsumer
			}
			byTime[k] = append(byTime[k], f.insert(t, row{movedAt: t0.Add(time.Duration(k) * time.Minute), source: src}))
		}
	}
	for k := 0; k < 5; k++ {
		ids := byTime[k]
		// UUIDv7 made in order by one process sort as made.
		want = append(want, ids...)
	}

	var got []oncebox.EventID
	var after *dlq.Cursor
	pages := 0
	for {
		rows, next, err := f.store.List(ctx, dlq.Filter{}, dlq.Page{Limit: 7, After: after})
		require.NoError(t, err)
		pages++
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if next == nil {
			break
		}
		require.Len(t, rows, 7)
		// The cursor survives its text form.
		parsed, err := dlq.ParseCursor(next.String())
		require.NoError(t, err)
		require.Equal(t, *next, parsed)
		after = &parsed
	}
	require.Equal(t, want, got)
	require.Equal(t, 4, pages, "7+7+7+4")

	// A page that ends exactly at the last row says so.
	rows, next, err := f.store.List(ctx, dlq.Filter{}, dlq.Page{Limit: 25})
	require.NoError(t, err)
	require.Len(t, rows, 25)
	require.Nil(t, next)
	rows, next, err = f.store.List(ctx, dlq.Filter{}, dlq.Page{})
	require.NoError(t, err)
	require.Len(t, rows, 25, "default limit 50")
	require.Nil(t, next)

	// Filters: source, moved range, status, event type; and Count.
	consumer := dlq.Filter{Source: oncebox.DLQSourceConsumer}
	rows, _, err = f.store.List(ctx, consumer, dlq.Page{})
	require.NoError(t, err)
	require.Equal(t, append(append([]oncebox.EventID{}, byTime[1]...), byTime[3]...), ids(rows))
	n, err := f.store.Count(ctx, consumer)
	require.NoError(t, err)
	require.Equal(t, 10, n)

	window := dlq.Filter{MovedFrom: t0.Add(time.Minute), MovedTo: t0.Add(3 * time.Minute)}
	rows, _, err = f.store.List(ctx, window, dlq.Page{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, byTime[1][:3], ids(rows))
	n, err = f.store.Count(ctx, window)
	require.NoError(t, err)
	require.Equal(t, 10, n, "from inclusive, to exclusive")

	_, err = f.store.SetStatusMany(ctx, byTime[4][:2], oncebox.DLQStatusToRetry)
	require.NoError(t, err)
	retry := dlq.Filter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusToRetry}, EventType: "order-created"}
	rows, next, err = f.store.List(ctx, retry, dlq.Page{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, byTime[4][:1], ids(rows))
	rows, next, err = f.store.List(ctx, retry, dlq.Page{Limit: 1, After: next})
	require.NoError(t, err)
	require.Equal(t, byTime[4][1:2], ids(rows))
	require.Nil(t, next)
	n, err = f.store.Count(ctx, dlq.Filter{EventType: "other"})
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = f.store.Count(ctx, dlq.Filter{})
	require.NoError(t, err)
	require.Equal(t, 25, n)

	// Bad pages and cursors.
	for _, p := range []dlq.Page{{Limit: -1}, {Limit: 1001}} {
		_, _, err := f.store.List(ctx, dlq.Filter{}, p)
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		require.ErrorContains(t, err, "Page.Limit")
	}
	for _, s := range []string{"", "not a cursor!", "AAAA"} {
		_, err := dlq.ParseCursor(s)
		require.ErrorIs(t, err, oncebox.ErrInvalidInput, s)
	}
	_, _, err = f.store.List(ctx, dlq.Filter{Statuses: []oncebox.DLQStatus{"nope"}}, dlq.Page{})
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	_, err = f.store.Count(ctx, dlq.Filter{Source: "nope"})
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
}

func ids(rows []dlq.Row) []oncebox.EventID {
	out := make([]oncebox.EventID, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
