package oracle

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
	"github.com/stretchr/testify/require"
)

// step is one scripted answer: rows for a query, an affected count or an
// error for an exec.
type step struct {
	rows [][]any
	n    int64
	err  error
}

type recorder struct {
	t      *testing.T
	log    []string
	script []step
}

func (r *recorder) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *recorder) next(what, query string) step {
	r.t.Helper()
	if len(r.script) == 0 {
		r.t.Fatalf("unscripted %s: %s", what, query)
	}
	s := r.script[0]
	r.script = r.script[1:]
	return s
}

func (r *recorder) BeginTx(_ context.Context, opts *sql.TxOptions) (wsql.Tx, error) {
	iso := "default"
	if opts != nil {
		iso = opts.Isolation.String()
	}
	r.logf("BEGIN (%s)", iso)
	return &fakeTx{r}, nil
}

func (r *recorder) ExecContext(ctx context.Context, q string, args ...any) (wsql.Result, error) {
	r.logf("-- on the handle given (no transaction of its own)")
	return (&fakeTx{r}).ExecContext(ctx, q, args...)
}

func (r *recorder) QueryContext(ctx context.Context, q string, args ...any) (wsql.Rows, error) {
	r.logf("-- on the handle given (no transaction of its own)")
	return (&fakeTx{r}).QueryContext(ctx, q, args...)
}

type fakeTx struct{ r *recorder }

func (tx *fakeTx) ExecContext(_ context.Context, q string, args ...any) (wsql.Result, error) {
	s := tx.r.next("exec", q)
	tx.r.logf("EXEC %s\n   args: %s", q, fmtArgs(args))
	if s.err != nil {
		tx.r.logf("   -> error: %v", s.err)
		return nil, s.err
	}
	tx.r.logf("   -> %d rows affected", s.n)
	return fakeResult(s.n), nil
}

func (tx *fakeTx) QueryContext(_ context.Context, q string, args ...any) (wsql.Rows, error) {
	s := tx.r.next("query", q)
	tx.r.logf("QUERY %s\n   args: %s", q, fmtArgs(args))
	if s.err != nil {
		tx.r.logf("   -> error: %v", s.err)
		return nil, s.err
	}
	return &fakeRows{r: tx.r, rows: s.rows, i: -1}, nil
}

func (tx *fakeTx) Commit() error { tx.r.logf("COMMIT"); return nil }

func (tx *fakeTx) Rollback() error { tx.r.logf("ROLLBACK"); return nil }

type fakeResult int64

func (n fakeResult) RowsAffected() (int64, error) { return int64(n), nil }

type fakeRows struct {
	r    *recorder
	rows [][]any
	i    int
}

func (f *fakeRows) Next() bool {
	f.i++
	if f.i >= len(f.rows) {
		f.r.logf("   fetch: no more rows")
		return false
	}
	f.r.logf("   fetch row %d of %d", f.i+1, len(f.rows))
	return true
}

func (f *fakeRows) Close() error {
	f.r.logf("   close cursor (%d of %d rows fetched)", min(f.i+1, len(f.rows)), len(f.rows))
	return nil
}

func (f *fakeRows) Err() error { return nil }

func (f *fakeRows) Scan(dest ...any) error {
	row := f.rows[f.i]
	if len(dest) != len(row) {
		return fmt.Errorf("scan: %d targets for %d columns", len(dest), len(row))
	}
	for i := range dest {
		if err := assign(dest[i], row[i]); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

// assign stores v into dest as database/sql would for these types.
func assign(dest, v any) error {
	dv := reflect.ValueOf(dest).Elem()
	if v == nil {
		dv.Set(reflect.Zero(dv.Type()))
		return nil
	}
	if s, ok := dest.(sql.Scanner); ok {
		return s.Scan(v)
	}
	if dv.Kind() == reflect.Pointer {
		p := reflect.New(dv.Type().Elem())
		if err := assign(p.Interface(), v); err != nil {
			return err
		}
		dv.Set(p)
		return nil
	}
	dv.Set(reflect.ValueOf(v).Convert(dv.Type()))
	return nil
}

func fmtArgs(args []any) string {
	parts := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			parts[i] = fmt.Sprintf("0x%X", v)
		case time.Time:
			parts[i] = v.Format(time.RFC3339Nano)
		case nil:
			parts[i] = "NULL"
		case string:
			parts[i] = fmt.Sprintf("%q", v)
		default:
			parts[i] = fmt.Sprint(v)
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func oraID(b byte) oncebox.EventID { return oncebox.EventID{b, 0, 0, 0, 0, 0, 0x70} }

func TestOracleRunMethodsGolden(t *testing.T) {
	d, err := New(oncebox.TablesConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tok := oraID(0xff)
	var out strings.Builder
	run := func(name string, script []step, fn func(r *recorder) string) {
		r := &recorder{t: t, script: script}
		result := fn(r)
		require.Empty(t, r.script, "%s: every scripted step is used", name)
		fmt.Fprintf(&out, "==== %s\n%s\n==> %s\n\n", name, strings.Join(r.log, "\n"), result)
	}
	claimRow := func(b byte) []any {
		return []any{oraB(b), "orders", nil, "m", []byte("p"), "{}", int64(0), at, nil}
	}

	run("Claim: Limit 2, three due rows: fetches two, updates two, commits", []step{
		{rows: [][]any{{int64(1)}}}, // the probe: something is due
		{rows: [][]any{claimRow(1), claimRow(2), claimRow(3)}},
		{n: 2},
	}, func(r *recorder) string {
		got, err := d.Claim(ctx, r, dialects.ClaimParams{EventType: "order-created", Limit: 2, Token: tok, Now: at})
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.Equal(t, oraID(1), got[0].ID)
		require.Equal(t, oraID(2), got[1].ID)
		require.Equal(t, []byte("{}"), got[0].Metadata)
		require.Nil(t, got[0].Key)
		require.Nil(t, got[0].FirstFailedAt)
		require.Equal(t, at, got[0].NextRetryAt)
		return fmt.Sprintf("%d claimed", len(got))
	})
	run("Claim: nothing due: the probe finds nothing, no transaction", []step{{}}, func(r *recorder) string {
		got, err := d.Claim(ctx, r, dialects.ClaimParams{EventType: "order-created", Limit: 2, Token: tok, Now: at})
		require.NoError(t, err)
		require.Empty(t, got)
		return "0 claimed"
	})
	run("Claim: the update fails: rolls back", []step{
		{rows: [][]any{{int64(1)}}}, // the probe: something is due
		{rows: [][]any{claimRow(1)}},
		{err: errors.New("ORA-00054: resource busy")},
	}, func(r *recorder) string {
		_, err := d.Claim(ctx, r, dialects.ClaimParams{EventType: "order-created", Limit: 2, Token: tok, Now: at})
		require.Error(t, err)
		return "error: " + err.Error()
	})
	run("MarkProcessed: every id marked: no read-back", []step{{n: 2}}, func(r *recorder) string {
		got, err := d.MarkProcessed(ctx, r, tok, []oncebox.EventID{oraID(1), oraID(2)}, at)
		require.NoError(t, err)
		require.Equal(t, []oncebox.EventID{oraID(1), oraID(2)}, got)
		return fmt.Sprintf("marked %v", got)
	})
	run("MarkProcessed: one of two still this claim's (the other recovered meanwhile): rolled back, then lock-first", []step{
		{n: 1},
		{rows: [][]any{{oraB(2)}}},
		{n: 1},
	}, func(r *recorder) string {
		got, err := d.MarkProcessed(ctx, r, tok, []oncebox.EventID{oraID(1), oraID(2)}, at)
		require.NoError(t, err)
		require.Equal(t, []oncebox.EventID{oraID(2)}, got)
		return fmt.Sprintf("marked %v", got)
	})
	tok2 := oncebox.EventID{0x0f}
	run("MarkProcessedClaims: two claims, every id marked: one transaction, no read-back", []step{{n: 2}, {n: 1}}, func(r *recorder) string {
		got, err := d.MarkProcessedClaims(ctx, r, []dialects.ClaimIDs{{Token: tok, IDs: []oncebox.EventID{oraID(1), oraID(2)}},
			{Token: tok2, IDs: []oncebox.EventID{oraID(3)}}}, at)
		require.NoError(t, err)
		require.Equal(t, []oncebox.EventID{oraID(1), oraID(2), oraID(3)}, got)
		return fmt.Sprintf("marked %v", got)
	})
	run("MarkProcessedClaims: the first claim stale (recovered meanwhile): rolled back, then MarkProcessed per claim", []step{
		{n: 0},
		{n: 0},
		{rows: [][]any{}},
		{n: 1},
	}, func(r *recorder) string {
		got, err := d.MarkProcessedClaims(ctx, r, []dialects.ClaimIDs{{Token: tok, IDs: []oncebox.EventID{oraID(1)}},
			{Token: tok2, IDs: []oncebox.EventID{oraID(3)}}}, at)
		require.NoError(t, err)
		require.Equal(t, []oncebox.EventID{oraID(3)}, got)
		return fmt.Sprintf("marked %v", got)
	})
	run("MoveToDLQ: limit 2, three FAILED rows: locks two, copies, deletes, commits", []step{
		{rows: [][]any{{int64(1)}}}, // the probe: something is due
		{rows: [][]any{{oraB(1)}, {oraB(2)}, {oraB(3)}}},
		{n: 2},
		{n: 2},
	}, func(r *recorder) string {
		n, err := d.MoveToDLQ(ctx, r, at, 2)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		return fmt.Sprintf("%d moved", n)
	})
	run("TransferDLQToOutbox: two rows of one event (latest moved wins), one without event id", []step{
		{rows: [][]any{{int64(1)}}}, // the probe: something is due
		{rows: [][]any{
			{oraB(0x11), oraB(1), "order-created", "orders", "k", "m-old", []byte("old"), `{"a":"1"}`, at.Add(-time.Hour), at.Add(-time.Minute)},
			{oraB(0x12), oraB(1), "order-created", "orders", "k", "m-new", []byte("new"), `{"a":"2","oncebox_event_id":"stale"}`, at.Add(-time.Hour), at},
			{oraB(0x13), nil, "order-paid", "payments", nil, "m3", nil, `{}`, at.Add(-time.Hour), at},
		}},
		{n: 1}, // event 1 is in the outbox (PROCESSED): re-armed
		{n: 0}, // the row without event id is not: inserted under its own id
		{n: 1},
		{n: 3},
	}, func(r *recorder) string {
		n, err := d.TransferDLQToOutbox(ctx, r, at, 10)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		return fmt.Sprintf("%d DLQ rows moved", n)
	})
	run("AcquireLease: taken", []step{{n: 1}}, func(r *recorder) string {
		ok, err := d.AcquireLease(ctx, r, dialects.Lease{Name: "j", Owner: "o", LockedAt: at, Until: at.Add(time.Minute)})
		require.NoError(t, err)
		require.True(t, ok)
		return fmt.Sprint("taken: ", ok)
	})
	run("AcquireLease: another instance inserted it first (ORA-00001): not taken", []step{
		{err: errors.New("ORA-00001: unique constraint (X.SYS_C001) violated")},
	}, func(r *recorder) string {
		ok, err := d.AcquireLease(ctx, r, dialects.Lease{Name: "j", Owner: "o", LockedAt: at, Until: at.Add(time.Minute)})
		require.NoError(t, err)
		require.False(t, ok)
		return fmt.Sprint("taken: ", ok)
	})
	run("InboxRecordMany (default namespace): new, present, inserted concurrently (ORA-00001)", []step{
		{n: 1}, {n: 0}, {err: errors.New("ORA-00001: unique constraint violated")},
	}, func(r *recorder) string {
		got, err := d.InboxRecordMany(ctx, r, "", []string{"a", "b", "c"}, at)
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, got)
		return fmt.Sprintf("new %v", got)
	})
	// Relay.Single, through DeleteProcessed: the golden file names it Exec.
	run("Exec", []step{{n: 7}}, func(r *recorder) string {
		n, err := d.DeleteProcessed(ctx, r, at, 1000)
		require.NoError(t, err)
		require.EqualValues(t, 7, n)
		return fmt.Sprintf("%d rows", n)
	})
	run("Exec: a deadlock victim (ORA-00060) is rolled back and run again", []step{
		{err: errors.New("ORA-00060: deadlock detected while waiting for resource")},
		{n: 7},
	}, func(r *recorder) string {
		n, err := d.DeleteProcessed(ctx, r, at, 1000)
		require.NoError(t, err)
		require.EqualValues(t, 7, n)
		return fmt.Sprintf("%d rows", n)
	})
	run("Exec: any other error is returned at once", []step{
		{err: errors.New("ORA-00942: table or view does not exist")},
	}, func(r *recorder) string {
		_, err := d.DeleteProcessed(ctx, r, at, 1000)
		require.ErrorContains(t, err, "ORA-00942")
		return "error: " + err.Error()
	})

	path := filepath.Join("testdata", "oracle_run.sql")
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		require.NoError(t, os.WriteFile(path, []byte(out.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./dialects -update to create %s", path)
	require.Equal(t, string(want), out.String())
}

func TestTransferEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e1 := oraID(1)
	rows := []sqlkit.TransferRow{
		{ID: oraID(0x12), EventID: &e1, EventType: "t", Metadata: []byte(`{"v":"b","oncebox_event_id":"old","oncebox_event_type":"old"}`), MovedAt: at},
		{ID: oraID(0x11), EventID: &e1, EventType: "t", Metadata: []byte(`{"v":"a"}`), MovedAt: at},
		{ID: oraID(0x10), EventID: &e1, EventType: "t", Metadata: []byte(`{"v":"late"}`), MovedAt: at.Add(-time.Second)},
		{ID: oraID(0x20), EventType: "u", Metadata: nil, MovedAt: at},
	}
	got, err := sqlkit.TransferEvents(rows)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, e1, got[0].ID)
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(got[0].Metadata), &m))
	require.Equal(t, map[string]string{"v": "b"}, m,
		"same moved_at: the higher id wins, as ORDER BY moved_at DESC, id DESC; the id and type live in the outbox row's columns, not its metadata")
	require.Equal(t, oraID(0x20), got[1].ID, "no event id: the DLQ row's own id")
	require.Equal(t, "u", got[1].EventType)
	require.JSONEq(t, `{}`, string(got[1].Metadata))

	_, err = sqlkit.TransferEvents([]sqlkit.TransferRow{{ID: oraID(1), Metadata: []byte("not json")}})
	require.Error(t, err)
}

func TestOracleSplitScript(t *testing.T) {
	t.Parallel()
	got := splitOracleScript("-- head\n\nBEGIN\n  x;\nEND;\n/\n-- c\nBEGIN\n  y;\n  -- inner\nEND;\n  /  \ntrailing")
	require.Equal(t, []string{"BEGIN\n  x;\nEND;", "BEGIN\n  y;\n  -- inner\nEND;", "trailing"}, got)
	// sqlkit.SplitStatements would cut a PL/SQL block at its inner semicolons.
	require.Greater(t, len(sqlkit.SplitStatements("BEGIN\n  x;\nEND;\n")), 1)
}

func TestOracleBinderIn(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 999, 1000, 1001, 2500} {
		var b binder
		b.P("first")
		vals := make([]any, n)
		s := b.In("c", vals)
		require.Len(t, b.Args, n+1, "n=%d", n)
		groups := (n + 999) / 1000
		require.Equal(t, groups, strings.Count(s, "c IN ("), "n=%d", n)
		require.True(t, strings.HasPrefix(s, map[bool]string{true: "(c IN (:2", false: "c IN (:2"}[groups > 1]), "n=%d: %.20s", n, s)
		require.True(t, strings.HasSuffix(s, fmt.Sprintf(":%d)", n+1)+map[bool]string{true: ")", false: ""}[groups > 1]), "n=%d", n)
	}
}

// oraB is oraID(b) as the driver returns a RAW(16): 16 bytes.
func oraB(b byte) []byte { id := oraID(b); return id[:] }

// TestOracleTransactionsUseTheDefaultIsolation pins what go-ora accepts: a
// transaction begun with an isolation level fails on go-ora v2.8.24.
func TestOracleTransactionsUseTheDefaultIsolation(t *testing.T) {
	t.Parallel()
	require.Nil(t, oracleTx.Options)
	require.NotNil(t, oracleTx.IsDeadlock, "a deadlock victim (ORA-00060) is run again")
}

// Every dialect binds an error text cleaned and cut at a character: go-ora
// binds a string over 4,000 bytes as LONG, which Oracle refuses in TO_CLOB.
func TestErrorTextIsCleanAndCutAtACharacter(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", sqlkit.ErrorText("short"))
	long := strings.Repeat("a", 3999) + "é" + "tail" // é is 2 bytes, at 3999-4000
	got := sqlkit.ErrorText(long)
	require.Equal(t, strings.Repeat("a", 3999), got, "not cut inside é")
	require.Len(t, sqlkit.ErrorText(strings.Repeat("b", 5000)), 4000)
	require.Equal(t, "a\uFFFDb\uFFFD", sqlkit.ErrorText("a\x00b\xff"))
}

// goldenInternal compares got with testdata/name, or rewrites it when the
// external tests' -update flag is set.
func goldenInternal(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./dialects -update to create %s", path)
	require.Equal(t, string(want), got)
}

func TestOracleMarkFailedMergeGolden(t *testing.T) {
	t.Parallel()
	d, err := New(oncebox.TablesConfig{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	q := d.eventsMarkFailedMerge(oraID(0xff), []dialects.FailedEvent{
		{ID: oraID(1), Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: at.Add(time.Second), Error: "boom"},
		{ID: oraID(2), Status: oncebox.StatusFailed, RetryCount: 5, NextRetryAt: at, Error: "bang"},
	}, at)
	goldenInternal(t, "oracle_mark_failed_merge.sql", q.SQL+"\n/\n-- args: "+fmtArgs(q.Args)+"\n")
}

func TestOracleLockNameFitsDBMSLock(t *testing.T) {
	t.Parallel()
	require.Equal(t, "oncebox-migrate:SVC.P_ONCEBOX_MIGRATIONS", oracleLockName("svc.p_oncebox_migrations"))
	long := oracleLockName(strings.Repeat("s", 100) + "." + strings.Repeat("p", 40) + "_oncebox_migrations")
	require.LessOrEqual(t, len(long), 128)
	require.True(t, strings.HasPrefix(long, "oncebox-migrate:"))
}
