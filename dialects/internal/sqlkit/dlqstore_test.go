package sqlkit_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// fakeExecutor answers every statement without a database: a query with one
// row, which row fills (none when row is nil), an exec with the count
// affected returns; it records the statements it ran.
type fakeExecutor struct {
	row      func(dest []any)
	affected func(q string, args []any) int64
	ran      []string
}

func (f *fakeExecutor) ExecContext(_ context.Context, q string, args ...any) (wsql.Result, error) {
	f.ran = append(f.ran, q)
	return fakeResult(f.affected(q, args)), nil
}

func (f *fakeExecutor) QueryContext(_ context.Context, q string, _ ...any) (wsql.Rows, error) {
	f.ran = append(f.ran, q)
	return &fakeRows{row: f.row}, nil
}

type fakeResult int64

func (r fakeResult) RowsAffected() (int64, error) { return int64(r), nil }

type fakeRows struct {
	row  func(dest []any)
	done bool
}

func (r *fakeRows) Next() bool {
	if r.done || r.row == nil {
		return false
	}
	r.done = true
	return true
}

func (r *fakeRows) Scan(dest ...any) error { r.row(dest); return nil }

func (r *fakeRows) Close() error { return nil }

// TestDLQListCutsAPayloadTheDatabaseReadWhole: Oracle reads the whole
// payload of a listed row; the runner cuts it to DLQListPayloadBytes and
// keeps its full size.
func TestDLQListCutsAPayloadTheDatabaseReadWhole(t *testing.T) {
	t.Parallel()
	whole := bytes.Repeat([]byte("p"), dialects.DLQListPayloadBytes+10)
	db := &fakeExecutor{row: func(dest []any) {
		var rec dialects.DLQRecord
		targets := rec.ListScanTargets()
		require.Len(t, dest, len(targets))
		for i, tg := range targets {
			if tg == any(&rec.Payload) {
				*dest[i].(*[]byte) = whole
			}
		}
		*dest[len(dest)-1].(*int64) = int64(len(whole))
	}}
	r := sqlkit.DLQStore{S: sqlkit.DLQStatements{
		List: func(dialects.DLQFilter, *dialects.DLQKey, int) dialects.Query { return dialects.Query{SQL: "list"} },
	}}
	recs, err := r.DLQList(context.Background(), db, dialects.DLQFilter{}, nil, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, whole[:dialects.DLQListPayloadBytes], recs[0].Payload)
	require.Equal(t, int64(len(whole)), recs[0].PayloadSize)
}

// TestDLQManySplitsTheIDs: DLQSetStatusMany and DLQDeleteMany run one
// statement for each MaxIDs ids and add up the rows they changed; no ids run
// no statement.
func TestDLQManySplitsTheIDs(t *testing.T) {
	t.Parallel()
	ids := make([]oncebox.EventID, 7)
	for i := range ids {
		ids[i] = oncebox.EventID{byte(i + 1)}
	}
	var sizes []int
	many := func(part []oncebox.EventID) dialects.Query {
		sizes = append(sizes, len(part))
		return dialects.Query{SQL: "many", Args: []any{len(part)}}
	}
	r := sqlkit.DLQStore{S: sqlkit.DLQStatements{
		SetStatusMany: func(ids []oncebox.EventID, _ oncebox.DLQStatus, _ []oncebox.DLQStatus, _ time.Time) dialects.Query {
			return many(ids)
		},
		DeleteMany: many,
		MaxIDs:     3,
	}}
	db := &fakeExecutor{affected: func(_ string, args []any) int64 { return int64(args[0].(int)) }}
	ctx := context.Background()
	n, err := r.DLQSetStatusMany(ctx, db, ids, oncebox.DLQStatusToRetry, []oncebox.DLQStatus{oncebox.DLQStatusMoved}, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	n, err = r.DLQDeleteMany(ctx, db, ids)
	require.NoError(t, err)
	require.EqualValues(t, 7, n)
	require.Equal(t, []int{3, 3, 1, 3, 3, 1}, sizes)
	n, err = r.DLQDeleteMany(ctx, db, nil)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, db.ran, 6, "no ids, no statement")
}
