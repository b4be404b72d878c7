package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

func TestDialectOfDSN(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://root@localhost/test":            "postgres",
		"host=localhost user=root":                  "postgres",
		"mysql://root@127.0.0.1:3306/test":          "mysql",
		"mariadb://root@127.0.0.1/test":             "mysql",
		"oracle://scott:tiger@db:1521/FREEPDB1":     "oracle",
		"postgresql://u:p@h:5432/d?sslmode=disable": "postgres",
	} {
		require.Equal(t, want, dialectOf(dsn), dsn)
	}
}

func TestMySQLConfigFromURL(t *testing.T) {
	t.Parallel()
	cfg, err := mysqlConfig("mysql://app:s%40cret@db.internal/orders?timeout=5s")
	require.NoError(t, err)
	require.Equal(t, "app", cfg.User)
	require.Equal(t, "s@cret", cfg.Passwd)
	require.Equal(t, "db.internal:3306", cfg.Addr)
	require.Equal(t, "orders", cfg.DBName)
	require.Equal(t, 5*time.Second, cfg.Timeout)
	require.True(t, cfg.ParseTime, "the MySQL dialect scans DATETIME(6) into time.Time")
	require.Equal(t, time.UTC, cfg.Loc)

	_, err = mysqlConfig("mysql://root@127.0.0.1/test?timeout=soon")
	require.Error(t, err, "a bad driver parameter is refused")
}

// TestCLIOnMariaDB runs migrate, status and the DLQ commands against the
// local MariaDB through a mysql:// DSN.
func TestCLIOnMariaDB(t *testing.T) {
	var tg dbtest.Target
	for _, x := range dbtest.Targets() {
		if x.Name == "mysql" {
			tg = x
		}
	}
	env := tg.NewEmpty(t)
	schema := strings.Split(env.Tables.Events, ".")[0]
	c := &cli{t: t, dsn: "mysql://root@127.0.0.1:3306/test", name: schema}
	run := func(args ...string) result { t.Helper(); return c.run("", args...) }

	r := run("migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 1 0001_init.sql")
	r = run("migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "applied 1")

	for i := range 3 {
		eid, err := oncebox.NewEventID()
		require.NoError(t, err)
		require.NoError(t, env.Dialect.InsertEvents(context.Background(), env.Beginner, []dialects.EventRow{{ID: eid, EventType: "order-created", Topic: "orders",
			MessageUUID: eid.String(), Payload: []byte("{}"), Metadata: "{}", CreatedAt: now.Add(-time.Duration(i+1) * time.Minute)}}))
	}
	eid, err := oncebox.NewEventID()
	require.NoError(t, err)
	rowID, err := oncebox.NewEventID()
	require.NoError(t, err)
	require.NoError(t, env.Dialect.PoisonUpsert(context.Background(), env.Beginner, dialects.DLQRow{ID: rowID, EventID: &eid, HandlerName: "billing",
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
	require.NotNil(t, st.Outbox[0].OldestPendingSeconds)
	require.Equal(t, int64(180), *st.Outbox[0].OldestPendingSeconds, "the oldest PENDING row is 3 minutes old")
	require.Equal(t, []dlqStat{{Status: "MOVED", Source: "consumer", Count: 1}}, st.DLQ)

	r = run("dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, rowID.String())
	r = run("dlq", "resolve", rowID.String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, env.Count(t, env.Tables.DLQ, "status = 'RESOLVED'"))
}
