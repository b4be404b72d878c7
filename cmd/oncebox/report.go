package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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
			t := c.d.Tables()
			now := a.clock.Now().UTC()

			outbox := []outboxStat{}
			rows, err := c.pool.Query(ctx, `SELECT event_type, status, count(*), min(created_at)
				FROM `+t.Events+` GROUP BY event_type, status ORDER BY event_type, status`)
			if err != nil {
				return fmt.Errorf("read %s: %w", t.Events, err)
			}
			for rows.Next() {
				var s outboxStat
				var oldest time.Time
				if err := rows.Scan(&s.EventType, &s.Status, &s.Count, &oldest); err != nil {
					rows.Close()
					return fmt.Errorf("read %s: %w", t.Events, err)
				}
				if s.Status == "PENDING" {
					o := oldest.UTC()
					age := int64(now.Sub(o) / time.Second)
					s.OldestPendingAt, s.OldestPendingSeconds = &o, &age
				}
				outbox = append(outbox, s)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read %s: %w", t.Events, err)
			}

			dlqs := []dlqStat{}
			rows, err = c.pool.Query(ctx, `SELECT status, source, count(*) FROM `+t.DLQ+
				` GROUP BY status, source ORDER BY status, source`)
			if err != nil {
				return fmt.Errorf("read %s: %w", t.DLQ, err)
			}
			for rows.Next() {
				var s dlqStat
				if err := rows.Scan(&s.Status, &s.Source, &s.Count); err != nil {
					rows.Close()
					return fmt.Errorf("read %s: %w", t.DLQ, err)
				}
				dlqs = append(dlqs, s)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read %s: %w", t.DLQ, err)
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
