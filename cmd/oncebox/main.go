// Command oncebox is the operators' CLI of Oncebox: it migrates the schema,
// reports the outbox and DLQ backlog, and lists, shows, retries, resolves and
// deletes DLQ rows. See docs/cli.md.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jonboulle/clockwork"
	_ "github.com/sijms/go-ora/v2" // the "oracle" driver
	"github.com/spf13/cobra"
	"golang.org/x/term"
	_ "modernc.org/sqlite" // the "sqlite" driver (pure Go)

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/dlq"
)

// Exit codes, documented in docs/cli.md.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitNotFound = 3
	exitAborted  = 4
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run runs the CLI with args and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(env{args: args, stdin: stdin, stdout: stdout, stderr: stderr})
}

// env is what the CLI reads from and writes to; tests fill the optional
// fields to fix the clock and to pretend stdin is a terminal.
type env struct {
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	// clock is the clock of status ages and of updated_at. Default: real.
	clock clockwork.Clock
	// interactive reports whether stdin is a terminal. Default:
	// term.IsTerminal on stdin's file descriptor.
	interactive func() bool
	// getenv reads the environment. Default: os.Getenv.
	getenv func(string) string
	// rootCtx is the root context. Default: context.Background().
	rootCtx context.Context
	// onListen is told the address admin serve listens on.
	onListen func(addr string)
	// buildInfo reads the binary's build information. Default:
	// debug.ReadBuildInfo.
	buildInfo func() (*debug.BuildInfo, bool)
}

// exitError carries the exit code of an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// errAborted is returned when the operator does not confirm.
var errAborted = errors.New("aborted: the answer was not \"yes\"; nothing changed")

// exitCode maps an error to the exit code scripts rely on.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errAborted):
		return exitAborted
	case errors.Is(err, dlq.ErrNotFound):
		return exitNotFound
	case errors.Is(err, dlq.ErrTooManyIDs), errors.Is(err, oncebox.ErrInvalidInput), errors.Is(err, oncebox.ErrInvalidConfig):
		return exitUsage
	}
	return exitFailed
}

// opErr marks an error returned by a command's work: unless it is one of
// the classified sentinels it is an operation failure (exit 1). Errors that
// cobra returns itself (unknown command or flag) are usage errors.
type opErr struct{ err error }

func (e *opErr) Error() string { return e.err.Error() }
func (e *opErr) Unwrap() error { return e.err }

// globals are the persistent flags.
type globals struct {
	dsn       string
	schema    string
	prefix    string
	database  string
	config    string
	json      bool
	noHeaders bool
	timeout   time.Duration
	// partitions is the --config file's outbox.partitions, or migrate's
	// --partition-interval: the dialect migrates to a partitioned outbox
	// (dialects.ForPartitions).
	partitions oncebox.PartitionsConfig
}

// app is one run of the CLI.
type app struct {
	env
	g globals
}

func runEnv(e env) int {
	if e.clock == nil {
		e.clock = clockwork.NewRealClock()
	}
	if e.getenv == nil {
		e.getenv = os.Getenv
	}
	if e.buildInfo == nil {
		e.buildInfo = debug.ReadBuildInfo
	}
	if e.interactive == nil {
		in := e.stdin
		e.interactive = func() bool {
			// A character device is not enough: /dev/null is one, and a
			// prompt on it reads EOF and aborts (exit 4) where a script
			// must be refused (exit 2). Only a terminal answers termios.
			f, ok := in.(*os.File)
			return ok && term.IsTerminal(int(f.Fd()))
		}
	}
	a := &app{env: e}
	root := a.rootCmd()
	root.SetArgs(e.args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	// cobra's completion command (oncebox completion bash|zsh|fish|
	// powershell), added here rather than by Execute so that an unknown
	// shell is a usage error instead of the help and exit 0. It takes its
	// output writer when it is added: after SetOut.
	root.InitDefaultCompletionCmd()
	// cobra's help command, added here so that `oncebox help dlq lst`
	// is the unknown command it names (exit 2) instead of a help and exit 0.
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			group(c)
		case "help":
			c.Run = nil
			c.RunE = helpTopic
		}
	}
	if e.rootCtx == nil {
		e.rootCtx = context.Background()
	}
	err := root.ExecuteContext(e.rootCtx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors: unknown command, bad flag
	var oe *opErr
	var ee *exitError
	if errors.As(err, &oe) || errors.As(err, &ee) {
		code = exitCode(err)
	}
	fmt.Fprintf(e.stderr, "oncebox: %s\n", strings.TrimPrefix(err.Error(), "oncebox: "))
	if code == exitUsage && oe == nil && ee == nil {
		path := "oncebox"
		var uc *unknownCommandError
		if errors.As(err, &uc) {
			path = uc.path
		}
		fmt.Fprintf(e.stderr, "run '%s --help' for usage\n", path)
	}
	return code
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "oncebox",
		Short: "Operate an Oncebox outbox and its dead letter queue on PostgreSQL",
		Long: "oncebox migrates the Oncebox schema, reports the outbox and DLQ backlog and\n" +
			"manages DLQ rows. Exit codes: 0 success, 1 operation failed, 2 usage error,\n" +
			"3 not found, 4 aborted at the confirmation prompt.",
		SilenceUsage:      true,
		SilenceErrors:     true,
		PersistentPreRunE: a.applyConfig,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// `oncebox dlq retyr --all`: cobra parses the group's flags before
		// its arguments; the mistyped command is the mistake to report.
		if cmd.HasParent() && cmd.HasSubCommands() && cmd.Args != nil {
			if args := cmd.Flags().Args(); len(args) > 0 {
				if aerr := cmd.Args(cmd, args); aerr != nil {
					return aerr
				}
			}
		}
		return &exitError{code: exitUsage, err: err}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.g.dsn, "dsn", "", "connection string: postgres://…, mysql://user:pass@host:3306/db or oracle://user:pass@host:1521/service (default $ONCEBOX_DSN)")
	pf.StringVar(&a.g.schema, "schema", "", "schema (MySQL: database) holding the oncebox tables (default: the connection's)")
	pf.StringVar(&a.g.prefix, "prefix", "", "table name prefix, e.g. billing_")
	pf.StringVar(&a.g.database, "database", "", "the database: "+strings.Join(registry.Names(), ", ")+" (default: told by --dsn or the --config file)")
	pf.StringVar(&a.g.config, "config", "", "the service's YAML configuration (oncebox.LoadConfig's): its tables.schema, tables.prefix and database, which flags override")
	pf.BoolVar(&a.g.json, "json", false, "machine-readable JSON output")
	pf.BoolVar(&a.g.noHeaders, "no-headers", false, "print tables without their header, title and footer lines")
	pf.DurationVar(&a.g.timeout, "timeout", 30*time.Second, "time limit of the command's database work (positive)")
	_ = root.RegisterFlagCompletionFunc("database", cobra.FixedCompletions(registry.Names(), cobra.ShellCompDirectiveNoFileComp))
	_ = root.MarkPersistentFlagFilename("config", "yaml", "yml", "json")
	root.AddCommand(a.migrateCmd(), a.statusCmd(), a.dlqCmd(), a.adminCmd(), a.versionCmd())
	completeValues(root)
	return root
}

// applyConfig reads --config and takes from it the schema, the prefix and
// the database that no flag gave, so that the CLI addresses the tables of
// the service the file configures. A flag given, even empty, wins.
func (a *app) applyConfig(cmd *cobra.Command, _ []string) error {
	// A zero or negative limit would end every command at once with a
	// "context deadline exceeded" that does not name the flag.
	if a.g.timeout <= 0 {
		return usageErr("--timeout must be positive (e.g. 30s, 2m), got %s", a.g.timeout)
	}
	if a.g.config != "" {
		cfg, err := oncebox.LoadConfigFile(a.g.config)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--config: %w", err)}
		}
		if cfg.Database != "" {
			if _, ok := registry.Lookup(cfg.Database); !ok {
				return &exitError{code: exitUsage, err: fmt.Errorf("--config: %s: %w: database: must be one of %s, or empty, got %q",
					a.g.config, oncebox.ErrInvalidConfig, strings.Join(registry.Names(), ", "), cfg.Database)}
			}
		}
		fl := cmd.Flags()
		if !fl.Changed("schema") {
			a.g.schema = cfg.Tables.Schema
		}
		if !fl.Changed("prefix") {
			a.g.prefix = cfg.Tables.Prefix
		}
		if !fl.Changed("database") {
			a.g.database = cfg.Database
		}
		p := cfg.Outbox.Partitions
		if fl.Changed("partition-interval") {
			p.Interval = a.g.partitions.Interval
		}
		a.g.partitions = p
	}
	if a.g.partitions.Enabled() || a.g.partitions.Interval < 0 {
		// The rules of the configuration's outbox.partitions (at least 1m).
		var c oncebox.Config
		c.Outbox.Partitions = a.g.partitions
		if err := c.WithDefaults().Validate(); err != nil {
			return usageErr("--partition-interval / outbox.partitions: %v", err)
		}
	}
	if a.g.database != "" {
		if _, ok := registry.Lookup(a.g.database); !ok {
			return usageErr("--database must be one of %s, got %q", strings.Join(registry.Names(), ", "), a.g.database)
		}
	}
	return nil
}

// group makes c, a command with sub-commands, refuse an unknown
// sub-command as the root does (exit 2, "unknown command … Did you mean
// this?") instead of printing its help and exiting 0, which a script would
// take for success. Without an argument it prints its help.
func group(c *cobra.Command) *cobra.Command {
	// Runnable, or cobra shows the help before it checks Args.
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	c.SuggestionsMinimumDistance = 2 // the root's default, which cobra sets on the root alone
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		// Not an exitError: runEnv makes it exit 2 with the pointer to
		// the group's --help, as it does cobra's own unknown command.
		return &unknownCommandError{path: cmd.CommandPath(), msg: msg}
	}
	return c
}

// unknownCommandError is a sub-command a group does not have; path is the
// group's command path, whose --help lists them.
type unknownCommandError struct{ path, msg string }

func (e *unknownCommandError) Error() string { return e.msg }

// helpTopic prints the help of the command args name, and refuses as
// unknown a command that does not exist, with the suggestions of the
// command itself.
func helpTopic(c *cobra.Command, args []string) error {
	cmd, rest, err := c.Root().Find(args)
	if err != nil {
		return err // the root's "unknown command … Did you mean this?"
	}
	if len(rest) > 0 {
		if cmd.HasSubCommands() && cmd.Args != nil {
			return cmd.Args(cmd, rest)
		}
		return &unknownCommandError{path: cmd.CommandPath(), msg: fmt.Sprintf("unknown command %q for %q", rest[0], cmd.CommandPath())}
	}
	cmd.InitDefaultHelpFlag()
	return cmd.Help()
}

// args wraps a positional-argument validator so its errors are usage errors.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		return nil
	}
}

// runE wraps a command's work so its errors are classified by exitCode.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := f(cmd, args); err != nil {
			return &opErr{err: withTablesHint(err)}
		}
		return nil
	}
}

// conn is an open database connection with the dialect.
type conn struct {
	db    wsql.Beginner
	d     dialects.Dialect
	close func()
}

func (c *conn) Close() { c.close() }

// dialectOf tells the database of a DSN by its URL scheme, as the registry
// maps them ("mysql" for mysql://… and mariadb://…, "oracle" for
// oracle://…); "postgres" for anything else: postgres://… and
// PostgreSQL's key=value form, which has no scheme.
func dialectOf(dsn string) string {
	if strings.HasPrefix(dsn, "file:") {
		return "sqlite" // modernc.org/sqlite's own form
	}
	if db, ok := registry.ForURL(dsn); ok {
		return db.Name
	}
	return "postgres"
}

// dialect validates --schema and --prefix for the database called name.
func (a *app) dialect(name string) (dialects.Dialect, error) {
	d, err := registry.New(name, oncebox.TablesConfig{Schema: a.g.schema, Prefix: a.g.prefix})
	if err != nil {
		return nil, usageErr("--schema/--prefix: %v", err)
	}
	if d, err = dialects.ForPartitions(d, a.g.partitions); err != nil {
		return nil, usageErr("--partition-interval / outbox.partitions: %v", err)
	}
	return d, nil
}

// dsn returns --dsn or $ONCEBOX_DSN, warning when --dsn holds a password.
func (a *app) dsn() string {
	if a.g.dsn == "" {
		return a.getenv("ONCEBOX_DSN")
	}
	if dsnHasPassword(a.g.dsn) {
		a.warnFlagSecret("--dsn", "ONCEBOX_DSN")
	}
	return a.g.dsn
}

// connect opens the pool and checks the server answers.
func (a *app) connect(ctx context.Context) (*conn, error) {
	dsn := a.dsn()
	if strings.TrimSpace(dsn) == "" {
		return nil, usageErr("no database: pass --dsn or set ONCEBOX_DSN")
	}
	name := dialectOf(dsn)
	if a.g.database != "" && a.g.database != name {
		return nil, dsnError(dsn, fmt.Sprintf("is a %s connection string, but the database is %s (--database or the --config file's database)", name, a.g.database))
	}
	d, err := a.dialect(name)
	if err != nil {
		return nil, err
	}
	if err := checkURL(dsn); err != nil {
		return nil, err
	}
	if name != "postgres" {
		return connectStd(ctx, name, dsn, d)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		hint := hintURL
		if !isURL(dsn) {
			hint = "check the port and the names of the keys, and quote a value with spaces, quotes or backslashes as 'v a\\'lue' " +
				"(the parser's own message is not shown: it can contain the password)"
		}
		return nil, dsnError(dsn, "cannot parse the PostgreSQL connection string: "+hint)
	}
	cfg.MaxConns = 4
	sec := secretsOf(cfg.ConnConfig.Password)
	where := fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", where, sec.scrub(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", where, sec.scrub(err))
	}
	return &conn{db: wsql.BeginnerFromPgx(pool), d: d, close: pool.Close}, nil
}

// connectStd opens a database/sql pool on MySQL/MariaDB (go-sql-driver),
// SQLite (modernc.org/sqlite) or Oracle (go-ora).
func connectStd(ctx context.Context, name, dsn string, d dialects.Dialect) (*conn, error) {
	driverName, driverDSN := "oracle", dsn
	var sec secrets
	switch name {
	case "sqlite":
		fileDSN, err := sqliteDriverDSN(dsn)
		if err != nil {
			return nil, err
		}
		driverName, driverDSN = "sqlite", fileDSN
	case "mysql":
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			return nil, err
		}
		driverName, driverDSN, sec = "mysql", cfg.FormatDSN(), secretsOf(cfg.Passwd)
	default:
		// go-ora quotes the DSN in its parse errors: parse it first.
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, dsnError(dsn, "cannot parse it as a URL: "+hintURL)
		}
		if u.User != nil {
			p, _ := u.User.Password()
			sec = secretsOf(p)
		}
	}
	db, err := sql.Open(driverName, driverDSN)
	if err != nil {
		return nil, dsnError(dsn, "the "+driverName+" driver refused the connection string (its message is not shown: it can contain the password)")
	}
	db.SetMaxOpenConns(4)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s: %w", shownDSN(dsn), sec.scrub(err))
	}
	return &conn{db: wsql.BeginnerFromStdSQL(db), d: d, close: func() { _ = db.Close() }}, nil
}

// ctx returns the command's context bounded by --timeout.
func (a *app) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if a.g.timeout > 0 {
		return context.WithTimeout(ctx, a.g.timeout)
	}
	return context.WithCancel(ctx)
}

func (a *app) store(c *conn) (*dlq.Store, error) {
	return dlq.NewStore(c.db, dlq.Config{Dialect: c.d, Clock: a.clock})
}

// open connects for one command and returns its context (bounded by
// --timeout), the connection and a func that releases both.
func (a *app) open(cmd *cobra.Command) (context.Context, *conn, func(), error) {
	ctx, cancel := a.ctx(cmd)
	c, err := a.connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, c, func() { c.Close(); cancel() }, nil
}

// openStore is open with the DLQ store over the connection.
func (a *app) openStore(cmd *cobra.Command) (context.Context, *dlq.Store, func(), error) {
	ctx, c, done, err := a.open(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := a.store(c)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return ctx, st, done, nil
}
