package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/migrate"
)

func (a *app) migrateCmd() *cobra.Command {
	var p printSQL
	var dry struct{ on, showSQL bool }
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the schema's migrations that are not applied yet, show them (--dry-run) or print their SQL (--print-sql)",
		Long: "Apply the schema's migrations that are not applied yet, in one transaction under a lock.\n\n" +
			"With --dry-run, read the versions the live schema has applied and print the migrations that\n" +
			"would run (--show-sql: and their SQL), changing nothing.\n\n" +
			"With --print-sql, connect to nothing and print the SQL of the migrations instead, for a team\n" +
			"that applies the schema with its own tool (goose, Flyway, Atlas, psql): see docs/schema.md.",
		Args: usageArgs(cobra.NoArgs),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if p.on && dry.on {
				return usageErr("--print-sql and --dry-run exclude each other: --print-sql connects to nothing, --dry-run reads the live schema")
			}
			if dry.showSQL && !dry.on {
				return usageErr("--show-sql goes with --dry-run (--print-sql prints the SQL without connecting)")
			}
			if p.on {
				return a.printSQL(p)
			}
			if p.from != 0 || p.to != 0 || p.outDir != "" {
				return usageErr("--from, --to and --out-dir go with --print-sql")
			}
			if dry.on {
				return a.dryRun(cmd, dry.showSQL)
			}
			ctx, c, done, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer done()
			// Before the first migration the migrations table does not
			// exist: nothing is applied.
			before, err := migrate.Applied(ctx, c.db, c.d)
			if err != nil {
				before = map[int]bool{}
			}
			if err := migrate.Migrate(ctx, c.db, c.d); err != nil {
				return err
			}
			after, err := migrate.Applied(ctx, c.db, c.d)
			if err != nil {
				return err
			}
			ms, err := c.d.Migrations()
			if err != nil {
				return err
			}
			type migration struct {
				Version int    `json:"version"`
				Name    string `json:"name"`
			}
			applied := []migration{}
			current := 0
			for _, m := range ms {
				if after[m.Version] && !before[m.Version] {
					applied = append(applied, migration{m.Version, m.Name})
				}
				if after[m.Version] && m.Version > current {
					current = m.Version
				}
			}
			if a.g.json {
				return writeJSON(a.stdout, map[string]any{"applied": applied, "current_version": current})
			}
			if len(applied) == 0 {
				fmt.Fprintf(a.stdout, "schema up to date at version %d; nothing applied\n", current)
				return nil
			}
			for _, m := range applied {
				fmt.Fprintf(a.stdout, "applied %d %s\n", m.Version, m.Name)
			}
			fmt.Fprintf(a.stdout, "schema at version %d\n", current)
			return nil
		}),
	}
	fl := c.Flags()
	fl.BoolVar(&p.on, "print-sql", false, "print the migrations' SQL (with the statements that record each version) instead of applying it")
	fl.IntVar(&p.from, "from", 0, "with --print-sql: the version the schema is at (0: empty)")
	fl.IntVar(&p.to, "to", 0, "with --print-sql: the last version to print (0: the latest)")
	fl.StringVar(&p.outDir, "out-dir", "", "with --print-sql: write one file per version in this directory instead of stdout")
	_ = c.MarkFlagDirname("out-dir")
	fl.BoolVar(&dry.on, "dry-run", false, "connect, read the versions the schema has applied and print the migrations that would run; change nothing")
	fl.BoolVar(&dry.showSQL, "show-sql", false, "with --dry-run: print the SQL of the migrations that would run")
	fl.DurationVar(&a.g.partitions.Interval, "partition-interval", 0,
		"PostgreSQL: partition the outbox table by time, one partition per this interval (e.g. 1h, 24h; at least 1m): "+
			"adds migration step 1001, which converts the table (new or existing; docs/postgresql.md, \"Partitions\"); "+
			"the --config file's outbox.partitions otherwise")
	return c
}

type outboxStat struct {
	EventType            string     `json:"event_type"`
	Status               string     `json:"status"`
	Count                int64      `json:"count"`
	OldestPendingAt      *time.Time `json:"oldest_pending_at,omitempty"`
	OldestPendingSeconds *int64     `json:"oldest_pending_age_seconds,omitempty"`
}

type dlqStat struct {
	Status string `json:"status"`
	Source string `json:"source"`
	Count  int64  `json:"count"`
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Report the outbox backlog and the DLQ, by event type, status and source",
		Args:  usageArgs(cobra.NoArgs),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			ctx, c, done, err := a.open(cmd)
			if err != nil {
				return err
			}
			defer done()
			now := a.clock.Now().UTC()

			outbox, dlqs, err := readBacklog(ctx, c)
			if err != nil {
				return err
			}
			for i := range outbox {
				if o := outbox[i].OldestPendingAt; o != nil {
					// Rows waiting for their delay or retry are not lag:
					// when every PENDING row waits, o is ahead and the age 0.
					age := max(int64(now.Sub(*o)/time.Second), 0)
					outbox[i].OldestPendingSeconds = &age
				}
			}

			if a.g.json {
				return writeJSON(a.stdout, map[string]any{"now": now, "outbox": outbox, "dlq": dlqs})
			}
			// --no-headers: the rows alone, the outbox's then, after an
			// empty line, the DLQ's.
			a.header(a.stdout, "OUTBOX")
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			a.header(tw, "EVENT TYPE\tSTATUS\tCOUNT\tOLDEST PENDING\tAGE")
			for _, s := range outbox {
				oldest, age := "-", "-"
				if s.OldestPendingAt != nil {
					oldest = s.OldestPendingAt.Format(time.RFC3339)
					age = (time.Duration(*s.OldestPendingSeconds) * time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.EventType, s.Status, s.Count, oldest, age)
			}
			if len(outbox) == 0 {
				a.header(tw, "(empty)\t\t\t\t")
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout)
			a.header(a.stdout, "DLQ")
			tw = tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			a.header(tw, "STATUS\tSOURCE\tCOUNT")
			for _, s := range dlqs {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", s.Status, s.Source, s.Count)
			}
			if len(dlqs) == 0 {
				a.header(tw, "(empty)\t\t")
			}
			return tw.Flush()
		}),
	}
}

// readBacklog reads the dialect's backlog: the outbox by event type and
// status (with the oldest PENDING row's time), the DLQ by status and
// source, each sorted.
func readBacklog(ctx context.Context, c *conn) ([]outboxStat, []dlqStat, error) {
	t := c.d.Tables()
	groups, err := c.d.Backlog(ctx, c.db)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s and %s: %w", t.Events, t.DLQ, err)
	}
	outbox, dlqs := []outboxStat{}, []dlqStat{}
	for _, g := range groups {
		if g.Table == dialects.BacklogDLQ {
			dlqs = append(dlqs, dlqStat{Status: g.Status, Source: g.Key, Count: g.Count})
			continue
		}
		s := outboxStat{EventType: g.Key, Status: g.Status, Count: g.Count}
		if g.Status == string(oncebox.StatusPending) && g.Oldest.Valid {
			o := g.Oldest.Time.UTC()
			s.OldestPendingAt = &o
		}
		outbox = append(outbox, s)
	}
	sort.Slice(outbox, func(i, j int) bool {
		if outbox[i].EventType != outbox[j].EventType {
			return outbox[i].EventType < outbox[j].EventType
		}
		return outbox[i].Status < outbox[j].Status
	})
	sort.Slice(dlqs, func(i, j int) bool {
		if dlqs[i].Status != dlqs[j].Status {
			return dlqs[i].Status < dlqs[j].Status
		}
		return dlqs[i].Source < dlqs[j].Source
	})
	return outbox, dlqs, nil
}

// header writes a line of a table that is not a row (a title, the column
// names, a footer), unless --no-headers.
func (a *app) header(w io.Writer, line string) {
	if !a.g.noHeaders {
		fmt.Fprintln(w, line)
	}
}

// printSQL are the flags of migrate --print-sql.
type printSQL struct {
	on       bool
	from, to int
	outDir   string
}

// printSQL prints, or writes to files, the SQL of the migrations for the
// database --database, the --config file or --dsn names, with connecting
// to nothing.
func (a *app) printSQL(p printSQL) error {
	name := a.g.database
	if name == "" {
		if dsn := a.dsn(); strings.TrimSpace(dsn) != "" {
			name = dialectOf(dsn)
		}
	}
	if name == "" {
		return usageErr("--print-sql: which database? pass --database postgres|mysql|oracle, a --config file with a database key, or --dsn")
	}
	d, err := a.dialect(name)
	if err != nil {
		return err
	}
	if err := checkVersions(d, p.from, p.to); err != nil {
		return err
	}
	scripts, err := migrate.Statements(d, p.from, p.to)
	if err != nil {
		return err
	}
	if len(scripts) == 0 {
		fmt.Fprintf(a.stderr, "oncebox: no migration above version %d: nothing to print\n", p.from)
	}
	for i, s := range scripts {
		if p.outDir == "" {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			fmt.Fprint(a.stdout, s.Text())
			continue
		}
		path := filepath.Join(p.outDir, s.Name)
		if err := os.WriteFile(path, []byte(s.Text()), 0o644); err != nil {
			return fmt.Errorf("--out-dir: %w", err)
		}
		fmt.Fprintln(a.stderr, "wrote", path)
	}
	return nil
}

// checkVersions refuses a --from or --to that is not a version of d's
// migrations, naming the flag and listing the versions.
func checkVersions(d dialects.Dialect, from, to int) error {
	ms, err := d.Migrations()
	if err != nil {
		return err
	}
	latest := len(ms)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = fmt.Sprintf("%d %s", m.Version, m.Name)
	}
	versions := fmt.Sprintf("the versions are %s (--from 0: an empty schema; --to 0: the latest)", strings.Join(names, ", "))
	switch {
	case from < 0 || from > latest:
		return usageErr("--from %d: no such version; %s", from, versions)
	case to < 0 || to > latest:
		return usageErr("--to %d: no such version; %s", to, versions)
	case to != 0 && from > to:
		return usageErr("--from %d is above --to %d; %s", from, to, versions)
	}
	return nil
}

// dryRun prints the migrations migrate would apply to the live schema: it
// reads the versions recorded in the migrations table (none when the table
// does not exist) and takes no lock, so another instance may apply them
// meanwhile. With showSQL it prints their SQL, as --print-sql does.
func (a *app) dryRun(cmd *cobra.Command, showSQL bool) error {
	ctx, c, done, err := a.open(cmd)
	if err != nil {
		return err
	}
	defer done()
	applied, err := migrate.Applied(ctx, c.db, c.d)
	if err != nil {
		if !isMissingTable(err) {
			return err
		}
		applied = map[int]bool{}
	}
	ms, err := c.d.Migrations()
	if err != nil {
		return err
	}
	type pending struct {
		Version int    `json:"version"`
		Name    string `json:"name"`
		SQL     string `json:"sql,omitempty"`
	}
	todo := []pending{}
	current, target := 0, 0
	for _, m := range ms {
		target = max(target, m.Version)
		if applied[m.Version] {
			current = max(current, m.Version)
			continue
		}
		p := pending{Version: m.Version, Name: m.Name}
		if showSQL {
			scripts, err := migrate.Statements(c.d, m.Version-1, m.Version)
			if err != nil {
				return err
			}
			for _, s := range scripts {
				p.SQL += s.Text()
			}
		}
		todo = append(todo, p)
	}
	if a.g.json {
		return writeJSON(a.stdout, map[string]any{"dry_run": true, "current_version": current,
			"target_version": target, "pending": todo})
	}
	switch {
	case len(todo) == 0:
		fmt.Fprintf(a.stdout, "schema up to date at version %d; nothing would be applied\n", current)
	default:
		if current == 0 {
			fmt.Fprintln(a.stdout, "schema empty")
		} else {
			fmt.Fprintf(a.stdout, "schema at version %d\n", current)
		}
		for _, p := range todo {
			fmt.Fprintf(a.stdout, "would apply %d %s\n", p.Version, p.Name)
		}
		fmt.Fprintf(a.stdout, "schema would be at version %d\n", target)
	}
	fmt.Fprintln(a.stdout, "dry run: nothing changed")
	for _, p := range todo {
		if p.SQL != "" {
			fmt.Fprint(a.stdout, "\n"+p.SQL)
		}
	}
	return nil
}
