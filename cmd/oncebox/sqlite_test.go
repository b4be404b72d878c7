package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

func TestSQLiteDriverDSN(t *testing.T) {
	t.Parallel()
	const params = "_txlock=immediate&_pragma=busy_timeout(10000)&_inttotime=1&_time_integer_format=unix_micro"
	for dsn, want := range map[string]string{
		"sqlite:///var/lib/svc/oncebox.db":             "file:/var/lib/svc/oncebox.db?" + params,
		"sqlite://oncebox.db":                          "file:oncebox.db?" + params,
		"sqlite3:///a%20b.db":                          "file:/a b.db?" + params,
		"file:/tmp/x.db":                               "file:/tmp/x.db?" + params,
		"file:/tmp/x.db?_txlock=deferred&_inttotime=1": "file:/tmp/x.db?_txlock=deferred&_inttotime=1&_pragma=busy_timeout(10000)&_time_integer_format=unix_micro",
	} {
		got, err := sqliteDriverDSN(dsn)
		require.NoError(t, err, dsn)
		require.Equal(t, want, got, dsn)
	}
	for _, dsn := range []string{"sqlite://", "postgres://x/y"} {
		_, err := sqliteDriverDSN(dsn)
		require.Error(t, err, dsn)
	}
	require.Equal(t, "sqlite", dialectOf("sqlite:///x.db"))
	require.Equal(t, "sqlite", dialectOf("file:/x.db"))
}

// TestCLIOnSQLite runs migrate, status and the DLQ commands on a SQLite
// file, through sqlite:///… and --database sqlite --dsn file:….
func TestCLIOnSQLite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "oncebox.db")
	c := &cli{t: t, dsn: "sqlite://" + file}
	run := func(args ...string) result { t.Helper(); return c.run("", args...) }

	r := run("migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 1 0001_init.sql")

	fileDSN, err := sqliteDriverDSN("file:" + file)
	require.NoError(t, err)
	db, err := sql.Open("sqlite", fileDSN)
	require.NoError(t, err)
	defer db.Close()
	d, err := registry.New("sqlite", oncebox.TablesConfig{})
	require.NoError(t, err)
	b := wsql.BeginnerFromStdSQL(db)
	for i := range 3 {
		eid, err := oncebox.NewEventID()
		require.NoError(t, err)
		require.NoError(t, d.InsertEvents(context.Background(), b, []dialects.EventRow{{ID: eid, EventType: "order-created", Topic: "orders",
			MessageUUID: eid.String(), Payload: []byte("{}"), Metadata: "{}", CreatedAt: now.Add(-time.Duration(i+1) * time.Minute)}}))
	}
	eid, err := oncebox.NewEventID()
	require.NoError(t, err)
	rowID, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, d.PoisonUpsert(context.Background(), b, dialects.DLQRow{ID: rowID, EventID: &eid, HandlerName: "billing",
		EventType: "order-created", Topic: "orders", MessageUUID: "m-1", Payload: []byte("{}"), Metadata: "{}",
		Error: "boom", FailedAt: now}))

	r = run("--json", "status")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		Outbox []outboxStat `json:"outbox"`
		DLQ    []dlqStat    `json:"dlq"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	require.Len(t, st.Outbox, 1)
	require.Equal(t, int64(3), st.Outbox[0].Count)
	require.Equal(t, []dlqStat{{Status: "MOVED", Source: "consumer", Count: 1}}, st.DLQ)

	// The driver's own form, with --database.
	c.dsn = "file:" + file
	r = run("--database", "sqlite", "dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, rowID.String())
	r = run("dlq", "resolve", rowID.String())
	require.Equal(t, 0, r.code, r.stderr)
	var status string
	require.NoError(t, db.QueryRow("SELECT status FROM "+d.Tables().DLQ).Scan(&status))
	require.Equal(t, "RESOLVED", status)

	r = c.runArgs("", "migrate", "--print-sql", "--database", "sqlite")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "CREATE TABLE")
}

// pgx lists each connection attempt's error; with sslmode=prefer (its
// default) the TLS attempt and the plain one fail alike, and the refusal
// was printed twice.
func TestRefusedConnectionIsPrintedOnce(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, dsn: "postgres://root@" + strings.Replace(dbtest.ClosedPort(t), "127.0.0.1", "localhost", 1) + "/test"}
	r := c.run("", "status")
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "connection refused"), r.stderr)
}
