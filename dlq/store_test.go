package dlq_test

import (
	"context"
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
		`{"a":"b"}`, string(r.status), r.movedAt.Add(-time.Minute), r.movedAt)
	require.NoError(t, err)
	return id
}

func (f *fixture) status(t *testing.T, id oncebox.EventID) oncebox.DLQStatus {
	t.Helper()
	r, err := f.store.Get(context.Background(), id)
	require.NoError(t, err)
	return r.Status
}

// The store's behaviour on every database is tested by the conformance
// suite (conformance/dlqstore_test.go); this file keeps the validation that
// happens before any SQL.

// TestListRefusesBadPagesAndCursors: input errors, before any SQL.
func TestListRefusesBadPagesAndCursors(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for _, p := range []dlq.Page{{Limit: -1}, {Limit: 1001}} {
		_, _, err := f.store.List(ctx, dlq.Filter{}, p)
		require.ErrorIs(t, err, oncebox.ErrInvalidInput)
		require.ErrorContains(t, err, "Page.Limit")
	}
	for _, s := range []string{"", "not a cursor!", "AAAA"} {
		_, err := dlq.ParseCursor(s)
		require.ErrorIs(t, err, oncebox.ErrInvalidInput, s)
	}
	_, _, err := f.store.List(ctx, dlq.Filter{Statuses: []oncebox.DLQStatus{"nope"}}, dlq.Page{})
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	_, err = f.store.Count(ctx, dlq.Filter{Source: "nope"})
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	_, err = f.store.SetStatusWhere(ctx, dlq.Filter{Source: "broker"}, oncebox.DLQStatusResolved)
	require.ErrorIs(t, err, oncebox.ErrInvalidInput)
	require.ErrorContains(t, err, "Filter.Source")
	require.ErrorIs(t, f.store.SetStatus(ctx, oncebox.EventID{}, "RETRYING"), oncebox.ErrInvalidInput)
}

func TestNewStoreValidates(t *testing.T) {
	t.Parallel()
	_, err := dlq.NewStore(nil, dlq.Config{})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "db is nil")
	require.ErrorContains(t, err, "Config.Dialect is nil")
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
