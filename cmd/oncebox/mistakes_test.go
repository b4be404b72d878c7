package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

// groups returns the command paths (without "oncebox") of every command
// that has sub-commands, the root excluded.
func groups(c *cobra.Command, path []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if !sub.HasSubCommands() {
			continue
		}
		p := append(append([]string{}, path...), sub.Name())
		out = append(out, p)
		out = append(out, groups(sub, p)...)
	}
	return out
}

// TestUnknownSubcommandOfAGroup: a mistyped sub-command of any command group
// is exit 2 with "unknown command" and a suggestion, as at the top level,
// never the group's help and exit 0.
func TestUnknownSubcommandOfAGroup(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	a := &app{}
	root := a.rootCmd()
	root.InitDefaultCompletionCmd()
	gs := groups(root, nil)
	require.GreaterOrEqual(t, len(gs), 3, "dlq, admin and completion: %v", gs)
	gs = append(gs, []string{"help"}, []string{"help", "dlq"})
	for _, g := range gs {
		r := c.runArgs("", append(append([]string{}, g...), "nope-nope")...)
		require.Equal(t, 2, r.code, "%v: %s", g, r.stdout)
		require.Empty(t, r.stdout, "%v: no help on stdout", g)
		// `help dlq nope-nope` names the command it was asked about.
		named := strings.TrimSpace(strings.Join(append([]string{"oncebox"}, g...), " "))
		named = strings.Replace(named, "oncebox help", "oncebox", 1)
		require.Contains(t, r.stderr, `unknown command "nope-nope" for "`+named+`"`, g)
		require.True(t, strings.HasSuffix(r.stderr, "\nrun '"+named+" --help' for usage\n"), "%v: %s", g, r.stderr)

		// Without a sub-command the group prints its help and succeeds.
		r = c.runArgs("", g...)
		require.Equal(t, 0, r.code, "%v: %s", g, r.stderr)
		require.Contains(t, r.stdout, "Usage:", g)
	}
	for _, tc := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"dlq", "lst"}, "list"},
		{[]string{"dlq", "retyr", id(1).String()}, "retry"},
		{[]string{"dlq", "resolv", "--all"}, "resolve"},
		{[]string{"admin", "srve"}, "serve"},
		{[]string{"completion", "bsh"}, "bash"},
		{[]string{"help", "dlq", "lst"}, "list"},
		{[]string{"help", "statuss"}, "status"},
	} {
		r := c.runArgs("", tc.args...)
		require.Equal(t, 2, r.code, "%v", tc.args)
		require.Empty(t, r.stdout, "%v", tc.args)
		require.Contains(t, r.stderr, "Did you mean this?\n\t"+tc.suggest+"\n", tc.args)
	}
}

// TestBadFilterValuesNameTheFlag: --status and --source name the flag and
// list the valid values, never a Go field name.
func TestBadFilterValuesNameTheFlag(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	for _, args := range [][]string{
		{"dlq", "list", "--status", "BOGUS"},
		{"dlq", "list", "--status", "MOVED,BOGUS"},
		{"dlq", "retry", "--status", "BOGUS", "--yes"},
	} {
		r := c.runArgs("", append([]string{"--dsn", "postgres://x@127.0.0.1/none"}, args...)...)
		require.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, "oncebox: --status: unknown status \"BOGUS\"; the statuses are MOVED, TO_RETRY, IN_PROCESS and RESOLVED\n", r.stderr, args)
	}
	r := c.runArgs("", "--dsn", "postgres://x@127.0.0.1/none", "dlq", "list", "--source", "broker")
	require.Equal(t, 2, r.code, r.stderr)
	require.Equal(t, "oncebox: --source: unknown source \"broker\"; the sources are publisher and consumer\n", r.stderr)
}

// TestDurationFlagsMustBePositive: a negative or zero --timeout is refused
// naming the flag, before anything connects.
func TestDurationFlagsMustBePositive(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	for _, v := range []string{"-1s", "0", "-5m"} {
		for _, args := range [][]string{{"status"}, {"dlq", "list"}, {"migrate"}} {
			r := c.runArgs("", append([]string{"--dsn", "postgres://x@127.0.0.1:1/none", "--timeout", v}, args...)...)
			require.Equal(t, 2, r.code, "%s %v: %s", v, args, r.stderr)
			require.Contains(t, r.stderr, "oncebox: --timeout must be positive", v)
		}
	}
	for _, fl := range []string{"--read-timeout", "--request-timeout", "--idle-timeout"} {
		r := c.runArgs("", "admin", "serve", "--insecure-no-auth", fl, "-1s")
		require.Equal(t, 2, r.code, r.stderr)
		require.Contains(t, r.stderr, fl+" must be positive", fl)
	}
}

// TestMigrateFromOutOfRange: one clear message naming the flag and the
// versions there are, without the package's prefixes.
func TestMigrateFromOutOfRange(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	for _, tc := range []struct{ args []string }{
		{[]string{"--from", "9"}}, {[]string{"--to", "9"}}, {[]string{"--from", "-1"}}, {[]string{"--from", "3", "--to", "2"}},
	} {
		r := c.runArgs("", append([]string{"migrate", "--print-sql", "--database", "postgres"}, tc.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "oncebox"), "%v: no stutter: %s", tc.args, r.stderr)
		require.NotContains(t, r.stderr, "invalid input", tc.args)
		require.Contains(t, r.stderr, "1 0001_init.sql, 2 0002_", tc.args)
	}
	r := c.runArgs("", "migrate", "--print-sql", "--database", "postgres", "--from", "9")
	require.True(t, strings.HasPrefix(r.stderr, "oncebox: --from 9: "), r.stderr)
}

// TestRowCountsSpeakEnglish: "1 row", and a no-op change counts nothing as
// changed.
func TestRowCountsSpeakEnglish(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2, status: oncebox.DLQStatusResolved})

	r := c.run("", "dlq", "list", "--status", "MOVED")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasSuffix(r.stdout, "(1 row, last page)\n"), r.stdout)
	r = c.run("", "dlq", "list", "--status", "IN_PROCESS")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasSuffix(r.stdout, "(0 rows, last page)\n"), r.stdout)

	r = c.run("", "dlq", "resolve", id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "0 of 1 row set to RESOLVED: it is already RESOLVED\n", r.stdout)
	r = c.run("", "--json", "dlq", "resolve", id(2).String())
	require.Equal(t, 0, r.code, r.stderr)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, float64(0), out["changed"])
	require.Equal(t, float64(1), out["skipped"])

	r = c.run("", "dlq", "resolve", id(1).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "1 of 1 row set to RESOLVED\n", r.stdout)
	require.Equal(t, "RESOLVED", c.dlqStatus(1))

	r = c.run("", "dlq", "delete", id(1).String())
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "1 of 1 row deleted\n", r.stdout)
}

// TestAdminServeIdleTimeout: an idle keep-alive connection is closed after
// 30s by default (not Go's 2 minutes), and the headers have their own limit.
func TestAdminServeIdleTimeout(t *testing.T) {
	t.Parallel()
	cmd := (&app{}).serveCmd()
	require.Equal(t, "30s", cmd.Flags().Lookup("idle-timeout").DefValue)
	srv := newServer(nil, defaultReadTimeout, defaultRequestTimeout, defaultIdleTimeout)
	require.Equal(t, 30*time.Second, srv.IdleTimeout)
	require.Equal(t, 10*time.Second, srv.ReadHeaderTimeout)
}

const missingTablesHintStart = "the oncebox tables are not there: run `oncebox migrate`"

// TestMissingTablesHint: status and the dlq commands on a schema that was
// never migrated say to run migrate, and keep the database's error.
func TestMissingTablesHint(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	c := &cli{t: t, schema: s}
	for _, args := range [][]string{
		{"status"}, {"dlq", "list"}, {"dlq", "show", id(1).String()}, {"dlq", "retry", id(1).String()},
		{"dlq", "delete", "--all", "--yes"},
	} {
		r := c.run("", args...)
		require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, missingTablesHintStart, args)
		require.Contains(t, r.stderr, "42P01", "%v: the original error is kept", args)
	}
	// Another error gets no such hint.
	r := c.run("", "dlq", "show", id(1).String()+"x")
	require.NotContains(t, r.stderr, missingTablesHintStart)
}

func TestMissingTablesHintOnMariaDB(t *testing.T) {
	t.Parallel()
	c, _ := mariaCLI(t)
	for _, args := range [][]string{{"status"}, {"dlq", "list"}} {
		r := c.run("", args...)
		require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, missingTablesHintStart, args)
		require.Contains(t, r.stderr, "1146", "%v: the original error is kept", args)
	}
}

// mariaCLI returns a CLI on a fresh, unmigrated MariaDB database.
func mariaCLI(t *testing.T) (*cli, *dbtest.Env) {
	t.Helper()
	var tg dbtest.Target
	for _, x := range dbtest.Targets() {
		if x.Name == "mysql" {
			tg = x
		}
	}
	env := tg.NewEmpty(t)
	schema := strings.Split(env.Tables.Events, ".")[0]
	return &cli{t: t, dsn: "mysql://root@127.0.0.1:3306/test", name: schema}, env
}

// tablesIn counts the tables of a PostgreSQL schema.
func tablesIn(t *testing.T, s *pgtest.Schema) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", s.Name).Scan(&n))
	return n
}

// TestMigrateDryRun: --dry-run reads the applied versions and prints what
// would run, changing nothing.
func TestMigrateDryRun(t *testing.T) {
	t.Parallel()
	s := pgtest.NewEmptySchema(t)
	c := &cli{t: t, schema: s}

	r := c.run("", "migrate", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 0, tablesIn(t, s), "nothing created")
	first := c.run("", "migrate")
	require.Equal(t, 0, first.code, first.stderr)
	want := strings.ReplaceAll(first.stdout, "applied ", "would apply ")
	want = strings.Replace(want, "schema at version", "schema would be at version", 1)
	require.Equal(t, "schema empty\n"+want+"dry run: nothing changed\n", r.stdout)

	r = c.run("", "migrate", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema up to date at version")

	// Forget the last version: the dry run shows it, with its SQL.
	mt := s.Dialect.Tables().Migrations
	var last int
	require.NoError(t, s.Pool.QueryRow(context.Background(), "SELECT max(version) FROM "+mt).Scan(&last))
	_, err := s.Pool.Exec(context.Background(), "DELETE FROM "+mt+" WHERE version = $1", last)
	require.NoError(t, err)
	tables := tablesIn(t, s)
	r = c.run("", "migrate", "--dry-run", "--show-sql")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema at version "+strconv.Itoa(last-1)+"\nwould apply "+strconv.Itoa(last)+" ")
	require.Contains(t, r.stdout, "-- oncebox migration "+strconv.Itoa(last)+" (")
	require.Contains(t, r.stdout, "INSERT INTO "+c.mask(mt))
	require.NotContains(t, r.stdout, "-- oncebox migration 1 (")
	require.Equal(t, last-1, s.Count(t, mt, ""), "nothing recorded")
	require.Equal(t, tables, tablesIn(t, s))

	r = c.run("", "--json", "migrate", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	var out struct {
		DryRun         bool `json:"dry_run"`
		CurrentVersion int  `json:"current_version"`
		Pending        []struct {
			Version int    `json:"version"`
			Name    string `json:"name"`
		} `json:"pending"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.True(t, out.DryRun)
	require.Equal(t, last-1, out.CurrentVersion)
	require.Len(t, out.Pending, 1)
	require.Equal(t, last, out.Pending[0].Version)

	r = c.run("", "--json", "migrate", "--dry-run", "--show-sql")
	require.Equal(t, 0, r.code, r.stderr)
	var withSQL struct {
		Pending []struct {
			SQL string `json:"sql"`
		} `json:"pending"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &withSQL), r.stdout)
	require.Len(t, withSQL.Pending, 1)
	require.Contains(t, withSQL.Pending[0].SQL, "-- oncebox migration "+strconv.Itoa(last)+" (")
	require.Equal(t, last-1, s.Count(t, mt, ""), "nothing recorded")

	r = c.run("", "migrate", "--show-sql")
	require.Equal(t, 2, r.code, "--show-sql goes with --dry-run")
	r = c.run("", "migrate", "--dry-run", "--print-sql")
	require.Equal(t, 2, r.code, "--dry-run and --print-sql exclude each other")
}

func TestMigrateDryRunOnMariaDB(t *testing.T) {
	t.Parallel()
	c, env := mariaCLI(t)
	countTables := func() int {
		t.Helper()
		var n int
		require.NoError(t, env.DB.QueryRowContext(context.Background(),
			"SELECT count(*) FROM information_schema.tables WHERE table_schema = ?", c.name).Scan(&n))
		return n
	}
	r := c.run("", "migrate", "--dry-run", "--show-sql")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema empty\nwould apply 1 0001_init.sql\n")
	require.Contains(t, r.stdout, "would apply 1 0001_init.sql")
	require.Contains(t, r.stdout, "CREATE TABLE")
	require.Equal(t, 0, countTables(), "nothing created")

	r = c.run("", "migrate")
	require.Equal(t, 0, r.code, r.stderr)
	tables := countTables()
	r = c.run("", "migrate", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema up to date at version")
	require.Equal(t, tables, countTables())
}

// TestCompletionOfValues: the shell scripts complete the values of --status,
// --source and the sub-commands of every group.
func TestCompletionOfValues(t *testing.T) {
	t.Parallel()
	c := &cli{t: t}
	complete := func(args ...string) []string {
		t.Helper()
		r := c.runArgs("", append([]string{"__complete"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var vals []string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if strings.HasPrefix(l, ":") {
				break
			}
			vals = append(vals, strings.SplitN(l, "\t", 2)[0])
		}
		return vals
	}
	for _, cmd := range []string{"list", "retry", "resolve", "delete"} {
		require.Equal(t, []string{"MOVED", "TO_RETRY", "IN_PROCESS", "RESOLVED"}, complete("dlq", cmd, "--status", ""), cmd)
		require.Equal(t, []string{"publisher", "consumer"}, complete("dlq", cmd, "--source", ""), cmd)
	}
	require.Equal(t, []string{"serve"}, complete("admin", ""))
	require.Contains(t, complete(""), "migrate")
	require.Contains(t, complete("migrate", "--"), "--dry-run")

	// What takes no file name says so (directive 4: no file completion);
	// what takes one keeps it.
	directive := func(args ...string) string {
		t.Helper()
		r := c.runArgs("", append([]string{"__complete"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		return lines[len(lines)-1]
	}
	for _, args := range [][]string{{"status", ""}, {"dlq", "show", ""}, {"dlq", "list", "--moved-from", ""},
		{"--dsn", ""}, {"--schema", ""}, {"admin", "serve", "--addr", ""}, {"migrate", "--from", ""}} {
		require.Equal(t, ":4", directive(args...), args)
	}
	require.Equal(t, ":0", directive("admin", "serve", "--token-file", ""))
	require.Equal(t, ":16", directive("migrate", "--out-dir", ""), "directories")
}
