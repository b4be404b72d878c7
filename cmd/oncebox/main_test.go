package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// now is the fixed clock of every run.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type result struct {
	code           int
	stdout, stderr string
}

type cli struct {
	t           *testing.T
	schema      *pgtest.Schema // nil: no --schema/--dsn, unless dsn is set
	dsn, name   string         // another database's --dsn and --schema
	interactive bool
	// buildInfo replaces debug.ReadBuildInfo when set.
	buildInfo func() (*debug.BuildInfo, bool)
}

func newCLI(t *testing.T) *cli {
	return &cli{t: t, schema: pgtest.NewSchema(t)}
}

// run runs the CLI in-process with --dsn and --schema of the test schema.
func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	var full []string
	if c.schema != nil {
		full = append(full, "--dsn", pgtest.DSN(), "--schema", c.schema.Name)
	} else if c.dsn != "" {
		full = append(full, "--dsn", c.dsn, "--schema", c.name)
	}
	return c.runArgs(stdin, append(full, args...)...)
}

// runArgs runs the CLI in-process with args alone.
func (c *cli) runArgs(stdin string, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code := runEnv(env{args: args, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		clock: clockwork.NewFakeClockAt(now), interactive: func() bool { return c.interactive },
		getenv: func(string) string { return "" }, buildInfo: c.buildInfo})
	return result{code: code, stdout: c.mask(out.String()), stderr: c.mask(errOut.String())}
}

func (c *cli) mask(s string) string {
	if c.schema != nil {
		s = strings.ReplaceAll(s, c.schema.Name, "SCHEMA")
	}
	return s
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/oncebox -update to write %s", path)
	require.Equal(t, string(want), got, "output differs from %s (go test ./cmd/oncebox -update rewrites it)", path)
}

// id returns a fixed UUIDv7-shaped row id.
func id(n int) oncebox.EventID {
	e, err := oncebox.ParseEventID(fmt.Sprintf("019ad5a0-0000-7000-8000-%012d", n))
	if err != nil {
		panic(err)
	}
	return e
}

type seed struct {
	n         int
	status    oncebox.DLQStatus
	source    oncebox.DLQSource
	eventType string
	movedAt   time.Time
}

// insert writes DLQ rows with fixed ids and times, as dlq/store_test.go does.
func (c *cli) insert(rows ...seed) {
	c.t.Helper()
	for _, r := range rows {
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
			r.movedAt = now.Add(-time.Duration(100-r.n) * time.Minute)
		}
		rid := id(r.n).String()
		// A parked outbox row's metadata holds the caller's headers (the
		// event id and type are columns); a consumed message's, the headers
		// it arrived with.
		handler, metadata := "", `{"a":"b"}`
		if r.source == oncebox.DLQSourceConsumer {
			handler, metadata = "billing-handler", `{"oncebox_event_id":"`+rid+`","a":"b"}`
		}
		_, err := c.schema.Pool.Exec(context.Background(), "INSERT INTO "+c.schema.Dialect.Tables().DLQ+
			` (id, event_id, source, handler_name, event_type, topic, partition_key, message_uuid, payload, metadata,
			   status, retry_count, last_error, created_at, first_failed_at, last_failed_at, moved_at, updated_at)
			VALUES ($1, $1, $2, $3, $4::text, $4::text || '-topic', 'k1', $5, '{"n":1}', $6, $7, 4, 'broker said no', $8, $8, $9, $9, $9)`,
			rid, string(r.source), handler, r.eventType, "msg-"+rid,
			metadata, string(r.status), r.movedAt.Add(-time.Minute), r.movedAt)
		require.NoError(c.t, err)
	}
}

func (c *cli) dlqStatus(n int) string {
	c.t.Helper()
	var s string
	err := c.schema.Pool.QueryRow(context.Background(),
		"SELECT status FROM "+c.schema.Dialect.Tables().DLQ+" WHERE id = $1", id(n).String()).Scan(&s)
	require.NoError(c.t, err)
	return s
}

func (c *cli) countDLQ() int { return c.schema.Count(c.t, c.schema.Dialect.Tables().DLQ, "") }

func TestMigrateTwice(t *testing.T) {
	s := pgtest.NewEmptySchema(t)
	c := &cli{t: t, schema: s}
	r := c.run("", "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 1 0001_init.sql")
	golden(t, "migrate_first.txt", r.stdout)

	r = c.run("", "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "migrate_second.txt", r.stdout)

	r = c.run("", "--json", "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		Applied        []any `json:"applied"`
		CurrentVersion int   `json:"current_version"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Empty(t, out.Applied)
	require.Equal(t, 5, out.CurrentVersion) // PostgreSQL's latest: 0005_dlq_error_class
}

func TestMissingDSNIsAUsageError(t *testing.T) {
	c := &cli{t: t}
	r := c.run("", "status")
	require.Equal(t, 2, r.code)
	require.Empty(t, r.stdout)
	golden(t, "error_missing_dsn.txt", r.stderr)
}

func TestUsageErrors(t *testing.T) {
	c := &cli{t: t}
	for name, args := range map[string][]string{
		"error_unknown_flag.txt":    {"dlq", "list", "--nope"},
		"error_unknown_command.txt": {"nope"},
		"error_bad_id.txt":          {"--dsn", "postgres://x@127.0.0.1/none", "dlq", "show", "not-a-uuid"},
		"error_ids_and_filter.txt":  {"--dsn", "postgres://x@127.0.0.1/none", "dlq", "retry", id(1).String(), "--status", "MOVED"},
		"error_bad_status.txt":      {"--dsn", "postgres://x@127.0.0.1/none", "dlq", "list", "--status", "LOST"},
	} {
		r := c.run("", args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stdout)
		golden(t, name, r.stderr)
	}
}

func TestStatus(t *testing.T) {
	c := newCLI(t)
	ev := c.schema.Dialect.Tables().Events
	for i, row := range []struct {
		eventType, status string
		age               time.Duration
	}{
		{"order-created", "PENDING", 90 * time.Minute},
		{"order-created", "PENDING", 5 * time.Minute},
		{"order-created", "PROCESSED", 2 * time.Hour},
		{"order-created", "FAILED", 3 * time.Hour},
		{"invoice-sent", "PENDING", 42 * time.Second},
		{"invoice-sent", "IN_PROCESS", time.Minute},
	} {
		at := now.Add(-row.age)
		_, err := c.schema.Pool.Exec(context.Background(), "INSERT INTO "+ev+
			` (id, event_type, topic, message_uuid, payload, status, next_retry_at, created_at, updated_at)
			VALUES ($1, $2, 't', 'm', '{}', $3, $4, $4, $4)`, id(500+i).String(), row.eventType, row.status, at)
		require.NoError(t, err)
	}
	c.insert(seed{n: 1}, seed{n: 2}, seed{n: 3, status: oncebox.DLQStatusToRetry},
		seed{n: 4, source: oncebox.DLQSourceConsumer}, seed{n: 5, status: oncebox.DLQStatusResolved, source: oncebox.DLQSourceConsumer})

	r := c.run("", "status")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "status.txt", r.stdout)
	r = c.run("", "--json", "status")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "status.json", r.stdout)
}

func TestDLQListAndShow(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2, source: oncebox.DLQSourceConsumer, eventType: "invoice-sent"},
		seed{n: 3, status: oncebox.DLQStatusToRetry}, seed{n: 4})

	r := c.run("", "dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list.txt", r.stdout)

	r = c.run("", "dlq", "list", "--limit", "2")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list_page1.txt", r.stdout)
	cursor := strings.TrimPrefix(strings.TrimSpace(r.stdout[strings.LastIndex(r.stdout, "next cursor: "):]), "next cursor: ")

	r = c.run("", "--json", "dlq", "list", "--limit", "2", "--cursor", cursor)
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list_page2.json", r.stdout)

	r = c.run("", "dlq", "list", "--status", "MOVED", "--status", "TO_RETRY", "--event-type", "order-created",
		"--source", "publisher", "--moved-from", now.Add(-98*time.Minute).Format(time.RFC3339), "--moved-to", now.Format(time.RFC3339))
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list_filtered.txt", r.stdout)

	r = c.run("", "dlq", "show", id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_show.txt", r.stdout)
	r = c.run("", "--json", "dlq", "show", id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_show.json", r.stdout)

	r = c.run("", "dlq", "show", id(99).String())
	require.Equal(t, 3, r.code)
	require.Empty(t, r.stdout)
	golden(t, "error_show_not_found.txt", r.stderr)
}

func TestRetryByIDs(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2}, seed{n: 3})
	r := c.run("", "dlq", "retry", id(1).String(), id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	// The retry says when the relays pick the rows up: on PostgreSQL its
	// transaction woke them.
	require.Equal(t, "2 of 2 rows set to TO_RETRY\nthe relays' dlq-retry job was woken: the rows go back to the outbox now "+
		"(a relay that is not listening runs it within 10s)\n", r.stdout)
	require.Equal(t, "TO_RETRY", c.dlqStatus(1))
	require.Equal(t, "TO_RETRY", c.dlqStatus(2))
	require.Equal(t, "MOVED", c.dlqStatus(3))

	r = c.run("", "--json", "dlq", "retry", id(3).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"action":"retry","status":"TO_RETRY","matched":1,"changed":1,"skipped":0,
		"pickup":{"woken":true,"within_seconds":10,"message":"the relays' dlq-retry job was woken: the rows go back to the outbox now (a relay that is not listening runs it within 10s)"}}`, r.stdout)
	require.Equal(t, "TO_RETRY", c.dlqStatus(3))

	// An unknown single id is "not found".
	r = c.run("", "dlq", "resolve", id(42).String())
	require.Equal(t, 3, r.code)
}

func TestResolveByFilterWithYes(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2, source: oncebox.DLQSourceConsumer}, seed{n: 3})
	r := c.run("", "dlq", "resolve", "--source", "publisher", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 of 2 rows set to RESOLVED\n", r.stdout)
	require.Equal(t, "RESOLVED", c.dlqStatus(1))
	require.Equal(t, "MOVED", c.dlqStatus(2))
	require.Equal(t, "RESOLVED", c.dlqStatus(3))
}

func TestConfirmationPrompt(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2}, seed{n: 3, eventType: "other"})

	// Not a terminal and no --yes: refused before anything is asked.
	r := c.run("yes\n", "dlq", "delete", "--event-type", "order-created")
	require.Equal(t, 2, r.code)
	golden(t, "error_filter_needs_yes.txt", r.stderr)
	r = c.run("yes\n", "--json", "dlq", "delete", "--all")
	require.Equal(t, 2, r.code)
	require.Equal(t, 3, c.countDLQ())

	c.interactive = true
	r = c.run("no\n", "dlq", "delete", "--event-type", "order-created")
	require.Equal(t, 4, r.code)
	require.Empty(t, r.stdout)
	golden(t, "error_prompt_no.txt", r.stderr)
	require.Equal(t, 3, c.countDLQ())

	r = c.run("yes\n", "dlq", "delete", "--event-type", "order-created")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 rows match; type yes to continue: ", r.stderr)
	require.Equal(t, "2 of 2 rows deleted\n", r.stdout)
	require.Equal(t, 1, c.countDLQ())
}

func TestInvalidTransition(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1, status: oncebox.DLQStatusInProcess})
	r := c.run("", "dlq", "retry", id(1).String())
	require.Equal(t, 1, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "IN_PROCESS")
	require.Contains(t, r.stderr, "TO_RETRY")
	golden(t, "error_invalid_transition.txt", r.stderr)
	require.Equal(t, "IN_PROCESS", c.dlqStatus(1))
}

func TestTooManyIDs(t *testing.T) {
	c := &cli{t: t}
	args := []string{"--dsn", "postgres://x@127.0.0.1/none", "dlq", "resolve"}
	for i := range 1001 {
		args = append(args, id(i).String())
	}
	r := c.run("", args...)
	require.Equal(t, 2, r.code)
	golden(t, "error_too_many_ids.txt", r.stderr)
}

func TestAdminServe(t *testing.T) {
	c := &cli{t: t}
	r := c.run("", "--dsn", "postgres://x@127.0.0.1/none", "admin", "serve")
	require.Equal(t, 2, r.code)
	golden(t, "error_serve_no_token.txt", r.stderr)

	s := pgtest.NewSchema(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		done <- runEnv(env{args: []string{"--dsn", pgtest.DSN(), "--schema", s.Name, "admin", "serve",
			"--addr", "127.0.0.1:0", "--token", "s3cret-token-for-tests"},
			stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &errOut, rootCtx: ctx,
			getenv: func(string) string { return "" }, onListen: func(a string) { addrc <- a }})
	}()
	var addr string
	select {
	case addr = <-addrc:
	case code := <-done:
		t.Fatalf("serve exited %d: %s", code, errOut.String())
	}
	get := func(token string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/dlq/events", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get(""))
	require.NotEqual(t, http.StatusUnauthorized, get("s3cret-token-for-tests"))
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "oncebox_backlog_last_refresh_success_timestamp_seconds")
	cancel()
	require.Equal(t, 0, <-done)
	http.DefaultClient.CloseIdleConnections()
}

// TestRowsMovedByTheRelay seeds the DLQ the way the relay does (FAILED outbox
// rows moved with EventsMoveToDLQ), then lists, retries several ids with one
// unknown among them, and shows the result.
func TestRowsMovedByTheRelay(t *testing.T) {
	c := newCLI(t)
	ctx := context.Background()
	ev := c.schema.Dialect.Tables().Events
	for i := range 3 {
		at := now.Add(-time.Duration(3-i) * time.Hour)
		_, err := c.schema.Pool.Exec(ctx, "INSERT INTO "+ev+
			` (id, event_type, topic, message_uuid, payload, status, retry_count, last_error, next_retry_at, created_at, updated_at, first_failed_at)
			VALUES ($1, 'order-created', 'orders', $2, '{"order":1}', 'FAILED', 4, 'kafka: leader not available', $3, $3, $3, $3)`,
			id(700+i).String(), fmt.Sprintf("msg-%d", i), at)
		require.NoError(t, err)
	}
	_, err := c.schema.Dialect.MoveToDLQ(ctx, c.schema.Beginner, now.Add(-time.Minute), 100)
	require.NoError(t, err)
	require.Equal(t, 3, c.countDLQ())

	r := c.run("", "dlq", "list", "--source", "publisher")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list_moved_by_relay.txt", r.stdout)

	r = c.run("", "dlq", "retry", id(700).String(), id(701).String(), id(9).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 of 3 rows set to TO_RETRY; 1 skipped (not found, IN_PROCESS, already there or changed meanwhile)\n"+
		"the relays' dlq-retry job was woken: the rows go back to the outbox now (a relay that is not listening runs it within 10s)\n", r.stdout)
	require.Equal(t, "TO_RETRY", c.dlqStatus(700))
	require.Equal(t, "TO_RETRY", c.dlqStatus(701))
	require.Equal(t, "MOVED", c.dlqStatus(702))

	r = c.run("", "--json", "dlq", "list", "--status", "TO_RETRY")
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		Items []map[string]any `json:"items"`
		Next  *string          `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out.Items, 2)
	require.Equal(t, id(700).String(), out.Items[0]["id"])
	require.Equal(t, "TO_RETRY", out.Items[0]["status"])
	require.Equal(t, now.Format(time.RFC3339), out.Items[0]["updated_at"]) // the fixed clock stamps the change
	require.Nil(t, out.Next)
}

// migrate --partition-interval (or the --config file's outbox.partitions)
// partitions the outbox table: step 1001 is applied after the others, and
// the table is partitioned, so the relay's clean-up job can maintain it.
// On a database that cannot partition, and for an interval under a minute,
// it is a usage error that names the setting, and nothing is migrated.
func TestMigratePartitioned(t *testing.T) {
	s := pgtest.NewEmptySchema(t)
	c := &cli{t: t, schema: s}
	r := c.run("", "migrate", "--partition-interval", "1h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 1001 1001_partition_outbox")
	var kind string
	require.NoError(t, s.Pool.QueryRow(context.Background(),
		"SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", s.Dialect.Tables().Events).Scan(&kind))
	require.Equal(t, "p", kind, "the outbox table is partitioned")

	r = c.run("", "migrate", "--partition-interval", "10s")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "outbox.partitions.interval: must be at least 1m, got 10s")

	r = c.run("", "migrate", "--print-sql", "--database", "sqlite", "--partition-interval", "1h")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "outbox.partitions: the sqlite dialect cannot partition the outbox table")

	cfg := filepath.Join(t.TempDir(), "oncebox.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("oncebox:\n  outbox:\n    partitions: {interval: 24h}\n"), 0o600))
	r = c.run("", "migrate", "--print-sql", "--database", "postgres", "--config", cfg)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "PARTITION BY RANGE (id)", "the --config file's outbox.partitions")
}
