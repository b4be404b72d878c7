package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// filterFlags are the DLQ filter flags shared by list, retry, resolve and
// delete.
type filterFlags struct {
	statuses  []string
	eventType string
	source    string
	movedFrom string
	movedTo   string
}

func (f *filterFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.statuses, "status", nil, "keep rows in this status: "+strings.Join(dlqStatuses, ", ")+" (repeatable, or comma-separated)")
	fl.StringVar(&f.eventType, "event-type", "", "keep rows of this event type")
	fl.StringVar(&f.source, "source", "", "keep rows of this source: publisher or consumer")
	fl.StringVar(&f.movedFrom, "moved-from", "", "keep rows moved to the DLQ at or after this time (RFC 3339)")
	fl.StringVar(&f.movedTo, "moved-to", "", "keep rows moved to the DLQ before this time (RFC 3339)")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(dlqStatuses, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("source", cobra.FixedCompletions(dlqSources, cobra.ShellCompDirectiveNoFileComp))
}

// set reports whether any filter flag was given.
func (f *filterFlags) set() bool {
	return len(f.statuses) > 0 || f.eventType != "" || f.source != "" || f.movedFrom != "" || f.movedTo != ""
}

// dlqStatuses and dlqSources are the values --status and --source take, in
// the order the help, the errors and the shell completion list them.
var (
	dlqStatuses = []string{string(oncebox.DLQStatusMoved), string(oncebox.DLQStatusToRetry),
		string(oncebox.DLQStatusInProcess), string(oncebox.DLQStatusResolved)}
	dlqSources = []string{string(oncebox.DLQSourcePublisher), string(oncebox.DLQSourceConsumer)}
)

// filterFields names the flags behind dlq.Filter's fields in its errors.
var filterFields = strings.NewReplacer("Filter.Statuses", "--status", "Filter.EventType", "--event-type",
	"Filter.Source", "--source", "Filter.MovedFrom", "--moved-from", "Filter.MovedTo", "--moved-to")

// either writes values as "a, b and c".
func either(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " and " + values[len(values)-1]
}

func (f *filterFlags) filter() (dlq.Filter, error) {
	var out dlq.Filter
	for _, s := range f.statuses {
		for _, p := range strings.Split(s, ",") {
			st := strings.ToUpper(strings.TrimSpace(p))
			if !slices.Contains(dlqStatuses, st) {
				return out, usageErr("--status: unknown status %q; the statuses are %s", p, either(dlqStatuses))
			}
			out.Statuses = append(out.Statuses, oncebox.DLQStatus(st))
		}
	}
	out.EventType = f.eventType
	if f.source != "" {
		src := strings.ToLower(f.source)
		if !slices.Contains(dlqSources, src) {
			return out, usageErr("--source: unknown source %q; the sources are %s", f.source, either(dlqSources))
		}
		out.Source = oncebox.DLQSource(src)
	}
	var err error
	if f.movedFrom != "" {
		if out.MovedFrom, err = time.Parse(time.RFC3339Nano, f.movedFrom); err != nil {
			return out, usageErr("--moved-from: %q is not an RFC 3339 time (e.g. 2026-11-30T12:00:00Z)", f.movedFrom)
		}
	}
	if f.movedTo != "" {
		if out.MovedTo, err = time.Parse(time.RFC3339Nano, f.movedTo); err != nil {
			return out, usageErr("--moved-to: %q is not an RFC 3339 time (e.g. 2026-11-30T12:00:00Z)", f.movedTo)
		}
	}
	if err := out.Validate(); err != nil {
		// The flags' names, not the Go fields'; the sentinel's and the
		// package's prefixes say nothing to the operator.
		msg := strings.TrimPrefix(err.Error(), oncebox.ErrInvalidInput.Error()+": dlq: ")
		return out, usageErr("%s", filterFields.Replace(msg))
	}
	return out, nil
}

func (a *app) dlqCmd() *cobra.Command {
	c := group(&cobra.Command{
		Use:   "dlq",
		Short: "List, show, retry, resolve and delete dead letter queue rows",
	})
	c.AddCommand(a.dlqListCmd(), a.dlqShowCmd(),
		a.dlqActCmd("retry", "Mark rows TO_RETRY: the relay's dlq-retry job puts them back in the outbox", oncebox.DLQStatusToRetry),
		a.dlqActCmd("resolve", "Mark rows RESOLVED: the dlq-clean-up job deletes them after the TTL", oncebox.DLQStatusResolved),
		a.dlqActCmd("delete", "Delete rows now", ""))
	return c
}

// encodePayload returns the payload as text when it is UTF-8, else base64.
func encodePayload(p []byte) (string, string) {
	if utf8.Valid(p) {
		return string(p), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(p), "base64"
}

func (a *app) dlqListCmd() *cobra.Command {
	var ff filterFlags
	var limit int
	var cursor string
	c := &cobra.Command{
		Use:   "list",
		Short: "List DLQ rows in (moved_at, id) order, one page at a time",
		Args:  usageArgs(cobra.NoArgs),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			if limit < 1 || limit > dlq.MaxLimit {
				return usageErr("--limit must be between 1 and %d, got %d", dlq.MaxLimit, limit)
			}
			page := dlq.Page{Limit: limit}
			if cursor != "" {
				cur, err := dlq.ParseCursor(cursor)
				if err != nil {
					return usageErr("--cursor: %v", err)
				}
				page.After = &cur
			}
			ctx, st, done, err := a.openStore(cmd)
			if err != nil {
				return err
			}
			defer done()
			rows, next, err := st.List(ctx, f, page)
			if err != nil {
				return err
			}
			if a.g.json {
				// The REST API's body of GET /dlq/events, to the byte.
				return writeJSON(a.stdout, dlq.NewListResponse(rows, next))
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			a.header(tw, "ID\tSTATUS\tSOURCE\tEVENT TYPE\tTOPIC\tHANDLER\tRETRIES\tMOVED AT\tLAST ERROR")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Status, r.Source, r.EventType,
					r.Topic, dash(r.HandlerName), r.RetryCount, r.MovedAt.Format(time.RFC3339), dash(oneLine(r.LastError, 60)))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			switch {
			case a.g.noHeaders:
			case next != nil:
				fmt.Fprintf(a.stdout, "next cursor: %s\n", next)
			default:
				fmt.Fprintf(a.stdout, "(%s, last page)\n", count(len(rows), "row"))
			}
			return nil
		}),
	}
	ff.add(c)
	c.Flags().IntVar(&limit, "limit", dlq.DefaultLimit, fmt.Sprintf("rows per page, 1 to %d", dlq.MaxLimit))
	c.Flags().StringVar(&cursor, "cursor", "", "the next cursor a previous page printed")
	return c
}

// count writes n and the noun: count(1, "row") is "1 row", count(2, "row")
// "2 rows"; a noun whose plural is not noun+"s" gives both forms.
func count(n int, forms ...string) string {
	one, many := forms[0], forms[0]+"s"
	if len(forms) > 1 {
		many = forms[1]
	}
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps the first line of s, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func parseID(s string) (oncebox.EventID, error) {
	id, err := oncebox.ParseEventID(s)
	if err != nil {
		return id, usageErr("%q is not a DLQ row id (a UUID)", s)
	}
	return id, nil
}

func (a *app) dlqShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show every column of one DLQ row",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			ctx, st, done, err := a.openStore(cmd)
			if err != nil {
				return err
			}
			defer done()
			r, err := st.Get(ctx, id)
			if err != nil {
				return err
			}
			if a.g.json {
				return writeJSON(a.stdout, r) // the REST API's body of GET /dlq/events/{id}
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			ts := func(t *time.Time) string {
				if t == nil {
					return "-"
				}
				return t.Format(time.RFC3339Nano)
			}
			eventID := "-"
			if r.EventID != nil {
				eventID = r.EventID.String()
			}
			for _, kv := range [][2]string{
				{"id", r.ID.String()}, {"event id", eventID}, {"status", string(r.Status)}, {"source", string(r.Source)},
				{"handler", dash(r.HandlerName)}, {"event type", r.EventType}, {"topic", r.Topic},
				{"key", dash(r.Key)}, {"message uuid", r.MessageUUID}, {"retries", fmt.Sprint(r.RetryCount)},
				{"created at", ts(&r.CreatedAt)}, {"first failed at", ts(r.FirstFailedAt)},
				{"last failed at", ts(r.LastFailedAt)}, {"moved at", ts(&r.MovedAt)}, {"updated at", ts(&r.UpdatedAt)},
				{"last error", dash(oneLine(r.LastError, 1<<20))},
			} {
				fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, "metadata:")
			keys := make([]string, 0, len(r.Metadata))
			for k := range r.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			tw = tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			for _, k := range keys {
				fmt.Fprintf(tw, "  %s\t%s\n", k, r.Metadata[k])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			payload, encoding := encodePayload(r.Payload)
			fmt.Fprintf(a.stdout, "payload (%s, %d bytes):\n%s\n", encoding, len(r.Payload), payload)
			return nil
		}),
	}
}

// dlqActCmd builds retry, resolve (to is the target status) and delete (to
// is "").
func (a *app) dlqActCmd(name, short string, to oncebox.DLQStatus) *cobra.Command {
	var ff filterFlags
	var all, yes, wait bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   name + " [ID...]",
		Short: short,
		Long: short + ".\n\nGive the rows' ids as arguments (at most 1,000), or filter flags (or --all) to act on\n" +
			"every row that matches; a filter asks for confirmation unless --yes.",
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (ff.set() || all) {
				return usageErr("give either ids or filter flags (--all), not both")
			}
			if all && ff.set() {
				return usageErr("--all acts on every row; leave it out to act on the filter")
			}
			if len(args) == 0 && !ff.set() && !all {
				return usageErr("give the rows' ids, filter flags, or --all to act on every row")
			}
			if len(args) > dlq.MaxIDs {
				return usageErr("%d ids given, at most %d per call; use filter flags for more", len(args), dlq.MaxIDs)
			}
			var ids []oncebox.EventID
			for _, s := range args {
				id, err := parseID(s)
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			f, err := ff.filter()
			if err != nil {
				return err
			}
			if (wait || cmd.Flags().Changed("timeout")) && to != oncebox.DLQStatusToRetry {
				return usageErr("--wait and --timeout are for retry only")
			}
			if cmd.Flags().Changed("timeout") && !wait {
				return usageErr("--timeout needs --wait")
			}
			if timeout <= 0 {
				return usageErr("--timeout must be positive, got %s", timeout)
			}
			if len(ids) == 0 && !yes && (a.g.json || !a.interactive()) {
				return usageErr("acting on a filter needs --yes when stdin is not a terminal or with --json")
			}
			ctx, st, done, err := a.openStore(cmd)
			if err != nil {
				return err
			}
			defer done()
			var matched, changed int
			already := false // the one id given is at the status already
			switch {
			case len(ids) == 1 && to == "":
				matched = 1
				if err := st.Delete(ctx, ids[0]); err != nil {
					return err
				}
				changed = 1
			case len(ids) == 1:
				matched = 1
				// The statement's count tells a change from a no-op, which
				// SetStatus does not; SetStatus then explains a row not
				// changed: an error (not found, IN_PROCESS, a change not
				// allowed), or nil when the row is at the status already.
				// Should the row leave IN_PROCESS between the two
				// statements, SetStatus changes it and this reports it as
				// already there: the status is right, the count is 0.
				if changed, err = st.SetStatusMany(ctx, ids, to); err != nil {
					return err
				}
				if changed == 0 {
					if err := st.SetStatus(ctx, ids[0], to); err != nil {
						return err
					}
					already = true
				}
			case len(ids) > 1:
				matched = len(ids)
				if to == "" {
					changed, err = st.DeleteMany(ctx, ids)
				} else {
					changed, err = st.SetStatusMany(ctx, ids, to)
				}
				if err != nil {
					return err
				}
			default:
				if matched, err = st.Count(ctx, f); err != nil {
					return err
				}
				if matched == 0 {
					break
				}
				if !yes {
					fmt.Fprintf(a.stderr, "%s; type yes to continue: ", count(matched, "row matches", "rows match"))
					line, _ := bufio.NewReader(a.stdin).ReadString('\n')
					if strings.TrimSpace(line) != "yes" {
						return errAborted
					}
				}
				if to == "" {
					changed, err = st.DeleteWhere(ctx, f)
				} else {
					changed, err = st.SetStatusWhere(ctx, f, to)
				}
				if err != nil {
					return err
				}
			}
			var pickup dlq.Pickup
			if to == oncebox.DLQStatusToRetry {
				pickup = st.RetryPickup()
			}
			var back *waitResult
			if wait {
				// Rows already TO_RETRY are waited for too: they go back
				// with the ones just changed.
				w, err := a.waitBack(ctx, st, ids, f, changed, timeout)
				if err != nil {
					return err
				}
				back = &w
			}
			if a.g.json {
				out := map[string]any{"action": name, "matched": matched, "changed": changed, "skipped": max(matched-changed, 0)}
				if to != "" {
					out["status"] = string(to)
				}
				if to == oncebox.DLQStatusToRetry && (changed > 0 || already) {
					out["pickup"] = map[string]any{"woken": pickup.Woken, "within_seconds": int(pickup.Within / time.Second), "message": pickup.String()}
				}
				if back != nil {
					out["back_in_outbox"] = back.back
					out["left_retry"] = back.other
					out["waited_seconds"] = back.waited.Seconds()
				}
				if back != nil && back.pending > 0 {
					if err := writeJSON(a.stdout, out); err != nil {
						return err
					}
					return back.timeoutErr()
				}
				return writeJSON(a.stdout, out)
			}
			verb := map[string]string{"retry": "set to TO_RETRY", "resolve": "set to RESOLVED", "delete": "deleted"}[name]
			fmt.Fprintf(a.stdout, "%d of %s %s", changed, count(matched, "row"), verb)
			switch skipped := matched - changed; {
			case already:
				fmt.Fprintf(a.stdout, ": it is already %s", to)
			case skipped > 0:
				fmt.Fprintf(a.stdout, "; %d skipped (not found, IN_PROCESS, already there or changed meanwhile)", skipped)
			}
			fmt.Fprintln(a.stdout)
			if to == oncebox.DLQStatusToRetry && back == nil && (changed > 0 || already) {
				fmt.Fprintln(a.stdout, pickup)
			}
			if back != nil {
				if back.pending > 0 {
					return back.timeoutErr()
				}
				fmt.Fprintf(a.stdout, "%s back in the outbox after %s", count(back.back, "row is", "rows are"), back.waited.Round(time.Millisecond))
				if back.other > 0 {
					fmt.Fprintf(a.stdout, "; %d left TO_RETRY otherwise (set MOVED or RESOLVED meanwhile)", back.other)
				}
				fmt.Fprintln(a.stdout)
			}
			return nil
		}),
	}
	ff.add(c)
	c.Flags().BoolVar(&all, "all", false, "act on every row (with no other filter)")
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation when acting on a filter")
	if to == oncebox.DLQStatusToRetry {
		c.Flags().BoolVar(&wait, "wait", false, "return once the rows are back in the outbox (the relays' dlq-retry job moved them), or fail after --timeout")
	}
	c.Flags().DurationVar(&timeout, "timeout", time.Minute, "with --wait: how long to wait before failing (exit 1)")
	if to != oncebox.DLQStatusToRetry {
		_ = c.Flags().MarkHidden("timeout")
	}
	return c
}

// waitPoll is how often --wait reads the rows it waits for.
const waitPoll = 250 * time.Millisecond

// waitResult is what --wait saw.
type waitResult struct {
	back    int // rows gone from the DLQ: back in the outbox
	other   int // rows that left TO_RETRY another way (an operator set them MOVED or RESOLVED)
	pending int // rows still TO_RETRY or IN_PROCESS at the timeout
	waited  time.Duration
	pickup  dlq.Pickup
}

func (w waitResult) timeoutErr() error {
	return &exitError{code: exitFailed, err: fmt.Errorf("--wait: %s still TO_RETRY or IN_PROCESS after %s (%d back in the outbox): "+
		"is a relay with the DLQ enabled (outbox.dlq.enabled) running on this database? Its dlq-retry job moves them (pickup: %s)",
		count(w.pending, "row is", "rows are"), w.waited.Round(time.Millisecond), w.back, w.pickup.Short())}
}

// waitBack waits until the rows of ids (or, without ids, the rows matching
// f) are no longer TO_RETRY or IN_PROCESS: the relays' dlq-retry job moved
// them back to the outbox (the row is gone from the DLQ), or an operator
// changed them meanwhile. It reads them every waitPoll on the CLI's clock
// and gives up after timeout.
func (a *app) waitBack(ctx context.Context, st *dlq.Store, ids []oncebox.EventID, f dlq.Filter, changed int, timeout time.Duration) (waitResult, error) {
	start := a.clock.Now()
	res := waitResult{pickup: st.RetryPickup()}
	waiting := slices.Clone(ids)
	f.Statuses = []oncebox.DLQStatus{oncebox.DLQStatusToRetry, oncebox.DLQStatusInProcess}
	first := -1 // the rows matching f at the first reading
	for {
		res.pending = 0
		if len(ids) > 0 {
			var still []oncebox.EventID
			for _, id := range waiting {
				r, err := st.Get(ctx, id)
				switch {
				case errors.Is(err, dlq.ErrNotFound):
					res.back++
				case err != nil:
					return res, err
				case r.Status == oncebox.DLQStatusToRetry || r.Status == oncebox.DLQStatusInProcess:
					still = append(still, id)
				default:
					res.other++
				}
			}
			waiting = still
			res.pending = len(still)
		} else {
			n, err := st.Count(ctx, f)
			if err != nil {
				return res, err
			}
			if first < 0 {
				// At least the rows just changed were waited for, even if
				// some went back before this first reading.
				first = max(n, changed)
			}
			res.pending, res.back = n, max(first-n, 0)
		}
		res.waited = a.clock.Since(start)
		if res.pending == 0 || res.waited >= timeout {
			return res, nil
		}
		t := a.clock.NewTimer(min(waitPoll, timeout-res.waited))
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		}
	}
}
