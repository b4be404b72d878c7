package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/migrate"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	c := &cli{t: t, buildInfo: func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/oncebox/watermill-oncebox", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "64b8409"}, {Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
				{Key: "vcs.modified", Value: "true"}}}, true
	}}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	r := c.runArgs("", "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "oncebox v1.2.3 (revision 64b8409 of 2026-11-30T12:00:00Z, modified), go1.26.0 "+platform+"\n", r.stdout)
	r = c.runArgs("", "--json", "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"version": "v1.2.3", "revision": "64b8409", "revision_time": "2026-11-30T12:00:00Z",
		"modified": true, "go": "go1.26.0", "platform": "`+platform+`"}`, r.stdout)

	// A binary without build information still answers.
	c.buildInfo = func() (*debug.BuildInfo, bool) { return nil, false }
	r = c.runArgs("", "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "oncebox unknown, "+runtime.Version()+" "+platform+"\n", r.stdout)

	// The test binary's own: a version and the Go that built it.
	r = (&cli{t: t}).runArgs("", "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^oncebox \S+.*, go1\.\d+`, r.stdout)
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	for shell, mark := range map[string]string{"bash": "__start_oncebox", "zsh": "#compdef oncebox",
		"fish": "complete -c oncebox", "powershell": "Register-ArgumentCompleter"} {
		r := c.runArgs("", "completion", shell)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, mark, shell)
	}
	r := c.runArgs("", "completion", "tcsh")
	require.Equal(t, 2, r.code)

	// What the scripts ask the binary: commands, and --database's values.
	r = c.runArgs("", "__complete", "dlq", "")
	require.Equal(t, 0, r.code, r.stderr)
	for _, sub := range []string{"list", "show", "retry", "resolve", "delete"} {
		require.Contains(t, r.stdout, sub+"\t")
	}
	r = c.runArgs("", "__complete", "--database", "")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "postgres\nmysql\noracle\nsqlite\n:"), r.stdout)
}

func TestNoHeaders(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2, source: oncebox.DLQSourceConsumer, eventType: "invoice-sent"}, seed{n: 3})

	r := c.run("", "dlq", "list", "--no-headers", "--limit", "2")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "dlq_list_no_headers.txt", r.stdout)
	r = c.run("", "--no-headers", "dlq", "list", "--cursor", "AAZhe8e6IgABmtWgAABwAIAAAAAAAAAC")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), r.stdout)
	require.True(t, strings.HasPrefix(r.stdout, id(3).String()), r.stdout)

	r = c.run("", "status", "--no-headers")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "status_no_headers.txt", r.stdout)

	// JSON has no headers to leave out.
	withJSON := c.run("", "--json", "--no-headers", "status")
	require.Equal(t, c.run("", "--json", "status"), withJSON)
}

// writeConfig writes the service's YAML and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "service.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

func TestConfigFile(t *testing.T) {
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2})
	other := pgtest.NewSchema(t)
	file := writeConfig(t, "oncebox:\n  database: postgres\n  tables:\n    schema: "+c.schema.Name+"\n  outbox:\n    defaults:\n      batch-size: 50\n")

	// The file's schema: the two rows.
	r := c.runArgs("", "--config", file, "--dsn", pgtest.DSN(), "dlq", "list", "--no-headers")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	// --schema wins over the file: the other schema's DLQ is empty.
	r = c.runArgs("", "--config", file, "--dsn", pgtest.DSN(), "--schema", other.Name, "dlq", "list", "--no-headers")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)

	// The database of the file must be the DSN's.
	mysqlFile := writeConfig(t, "oncebox:\n  database: mysql\n")
	r = c.runArgs("", "--config", mysqlFile, "--dsn", pgtest.DSN(), "status")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "is a postgres connection string, but the database is mysql")
	r = c.runArgs("", "--config", mysqlFile, "--database", "postgres", "--dsn", pgtest.DSN(), "--schema", c.schema.Name, "status")
	require.Equal(t, 0, r.code, r.stderr)

	// The file is the service's: what LoadConfig refuses, the CLI refuses,
	// naming the file and the key.
	for yaml, want := range map[string]string{
		"oncebox:\n  database: db2\n":               `database: must be one of postgres, mysql, oracle, sqlite, or empty, got "db2"`,
		"oncebox:\n  tables:\n    shema: billing\n": "tables.shema: unknown key; did you mean schema?",
		"oncebox:\n  tables:\n    schema: user\n":   `tables.schema: "user" is a reserved word`,
		"billing: {}\n":                             "billing: unknown top-level key",
	} {
		path := writeConfig(t, yaml)
		r = c.runArgs("", "--config", path, "--dsn", pgtest.DSN(), "status")
		require.Equal(t, 2, r.code, yaml)
		require.Contains(t, r.stderr, "--config: "+path, yaml)
		require.Contains(t, r.stderr, want, yaml)
	}
	r = c.runArgs("", "--config", filepath.Join(t.TempDir(), "missing.yaml"), "status")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "missing.yaml: no such file")
	r = c.runArgs("", "--database", "db2", "migrate", "--print-sql")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `--database must be one of postgres, mysql, oracle, sqlite, got "db2"`)
}

func TestMigratePrintSQL(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	// From the service's file, connecting to nothing.
	file := writeConfig(t, "oncebox:\n  database: mysql\n  tables:\n    schema: orders\n    prefix: billing_\n")
	d, err := registry.New("mysql", oncebox.TablesConfig{Schema: "orders", Prefix: "billing_"})
	require.NoError(t, err)
	scripts, err := migrate.Statements(d, 0, 0)
	require.NoError(t, err)
	var want []string
	for _, s := range scripts {
		want = append(want, s.Text())
	}
	r := c.runArgs("", "--config", file, "migrate", "--print-sql")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, strings.Join(want, "\n"), r.stdout)
	require.Contains(t, r.stdout, "INSERT INTO orders.billing_oncebox_migrations (version, name, applied_at) VALUES (3, '0003_heartbeats.sql', UTC_TIMESTAMP(6));\n")

	// One file per version, from a version on.
	dir := t.TempDir()
	r = c.runArgs("", "--config", file, "migrate", "--print-sql", "--from", "1", "--out-dir", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	var wantNames []string
	for _, s := range scripts[1:] {
		wantNames = append(wantNames, filepath.Join(dir, s.Name))
	}
	require.Equal(t, wantNames, names)
	for _, s := range scripts[1:] {
		got, err := os.ReadFile(filepath.Join(dir, s.Name))
		require.NoError(t, err)
		require.Equal(t, s.Text(), string(got))
	}

	// The database from --database or the DSN's scheme; --to stops early.
	r = c.runArgs("", "--database", "oracle", "migrate", "--print-sql", "--to", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "-- oncebox migration 1 (0001_init.sql), Oracle.")
	require.NotContains(t, r.stdout, "migration 2")
	// Each database has its own versions (PostgreSQL's 0005 stores the
	// DLQ's error class; the others have no such column).
	pg, err := registry.New("postgres", oncebox.TablesConfig{})
	require.NoError(t, err)
	pgScripts, err := migrate.Statements(pg, 0, 0)
	require.NoError(t, err)
	latest := strconv.Itoa(pgScripts[len(pgScripts)-1].Version)
	r = c.runArgs("", "--dsn", "postgres://nobody@127.0.0.1:1/none", "migrate", "--print-sql", "--from", latest)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Equal(t, "oncebox: no migration above version "+latest+": nothing to print\n", r.stderr)

	for _, args := range [][]string{
		{"migrate", "--print-sql"}, // which database?
		{"--database", "postgres", "migrate", "--print-sql", "--from", strconv.Itoa(pgScripts[len(pgScripts)-1].Version + 1)}, // beyond the latest
		{"--database", "postgres", "migrate", "--from", "1"},                                                                  // --from alone
		{"--database", "postgres", "--schema", "user", "migrate", "--print-sql"},
	} {
		r = c.runArgs("", args...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
	}
	r = c.runArgs("", "migrate", "--print-sql")
	require.Contains(t, r.stderr, "--print-sql: which database? pass --database postgres|mysql|oracle")
}
