package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/migrate"
)

func (a *app) migrateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the schema's migrations that are not applied yet",
		Args:  usageArgs(cobra.NoArgs),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
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
					age := int64(now.Sub(*o) / time.Second)
					outbox[i].OldestPendingSeconds = &age
				}
			}

			if a.g.json {
				return writeJSON(a.stdout, map[string]any{"now": now, "outbox": outbox, "dlq": dlqs})
			}
			fmt.Fprintln(a.stdout, "OUTBOX")
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "EVENT TYPE\tSTATUS\tCOUNT\tOLDEST PENDING\tAGE")
			for _, s := range outbox {
				oldest, age := "-", "-"
				if s.OldestPendingAt != nil {
					oldest = s.OldestPendingAt.Format(time.RFC3339)
					age = (time.Duration(*s.OldestPendingSeconds) * time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.EventType, s.Status, s.Count, oldest, age)
			}
			if len(outbox) == 0 {
				fmt.Fprintln(tw, "(empty)\t\t\t\t")
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "\nDLQ")
			tw = tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "STATUS\tSOURCE\tCOUNT")
			for _, s := range dlqs {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", s.Status, s.Source, s.Count)
			}
			if len(dlqs) == 0 {
				fmt.Fprintln(tw, "(empty)\t\t")
			}
			return tw.Flush()
		}),
	}
}

// readBacklog runs the dialect's backlog statement: the outbox by event type
// and status (with the oldest PENDING row's time), the DLQ by status and
// source, each sorted.
func readBacklog(ctx context.Context, c *conn) ([]outboxStat, []dlqStat, error) {
	q := c.d.Backlog()
	t := c.d.Tables()
	rows, err := c.db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s and %s: %w", t.Events, t.DLQ, err)
	}
	defer rows.Close()
	outbox, dlqs := []outboxStat{}, []dlqStat{}
	for rows.Next() {
		var kind, key, status string
		var count int64
		var oldest sql.NullTime
		if err := rows.Scan(&kind, &key, &status, &count, &oldest); err != nil {
			return nil, nil, fmt.Errorf("read %s and %s: %w", t.Events, t.DLQ, err)
		}
		if kind == "dlq" {
			dlqs = append(dlqs, dlqStat{Status: status, Source: key, Count: count})
			continue
		}
		s := outboxStat{EventType: key, Status: status, Count: count}
		if status == string(oncebox.StatusPending) && oldest.Valid {
			o := oldest.Time.UTC()
			s.OldestPendingAt = &o
		}
		outbox = append(outbox, s)
	}
	if e, ok := rows.(interface{ Err() error }); ok && e.Err() != nil {
		return nil, nil, fmt.Errorf("read %s and %s: %w", t.Events, t.DLQ, e.Err())
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
