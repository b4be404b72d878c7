package sqlkit

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// ConsoleStatements are the statements of a dialect's console reads
// (dialects.ConsoleInspector) on a database that cannot compute the error
// class in SQL: the class is computed here, by dialects.ErrorClass.
type ConsoleStatements struct {
	// Types selects, per event type with rows PENDING, IN_PROCESS or
	// FAILED or rows PROCESSED since processedSince: event_type, the three
	// counts, the oldest next_retry_at of a PENDING row due at now (or
	// NULL), the PROCESSED count.
	Types func(now, processedSince time.Time) dialects.Query
	// Heartbeats selects instance_id, heartbeat_at of every instance.
	Heartbeats func() dialects.Query
	// Claims selects claimed_by (NULL: ""), count(*), min(claimed_at) of
	// the IN_PROCESS rows, grouped by claimed_by.
	Claims func() dialects.Query
	// Errors selects id, source, event_type, status, moved_at, last_error
	// of the DLQ rows matching f with an id after after (nil: from the
	// first), in id order, at most limit: one keyset page.
	Errors func(f dialects.DLQFilter, after *oncebox.EventID, limit int) dialects.Query
	// GroupErrors selects id, last_error of the DLQ rows of source and
	// eventType in statuses with an id after after (nil: from the first),
	// in id order, at most limit.
	GroupErrors func(source oncebox.DLQSource, eventType string, statuses []oncebox.DLQStatus, after *oncebox.EventID, limit int) dialects.Query
	// OutboxEvent selects status, retry_count, created_at, updated_at of
	// the outbox row id.
	OutboxEvent func(id oncebox.EventID) dialects.Query
}

// Console runs ConsoleStatements as a dialects.ConsoleInspector.
type Console struct{ S ConsoleStatements }

// ConsoleTypes implements dialects.ConsoleInspector.
func (c Console) ConsoleTypes(ctx context.Context, db wsql.ContextExecutor, now, processedSince time.Time) ([]dialects.ConsoleType, error) {
	q := c.S.Types(now, processedSince)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.ConsoleType
	for rows.Next() {
		var t dialects.ConsoleType
		var oldest anyTime
		if err := rows.Scan(&t.EventType, &t.Pending, &t.InProcess, &t.Failed, &oldest, &t.Processed); err != nil {
			return nil, err
		}
		t.OldestDue = oldest.t
		out = append(out, t)
	}
	return out, RowsErr(rows)
}

// ConsoleInstances implements dialects.ConsoleInspector: the heartbeats
// and the claims, read apart and joined here (MySQL has no FULL JOIN).
func (c Console) ConsoleInstances(ctx context.Context, db wsql.ContextExecutor) ([]dialects.ConsoleInstance, error) {
	byID := map[string]*dialects.ConsoleInstance{}
	q := c.S.Heartbeats()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var at anyTime
		if err := rows.Scan(&id, &at); err != nil {
			_ = rows.Close()
			return nil, err
		}
		byID[id] = &dialects.ConsoleInstance{ID: id, HeartbeatAt: at.t}
	}
	if err := RowsErr(rows); err != nil {
		return nil, err
	}
	q = c.S.Claims()
	rows, err = db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id sql.NullString
		var n int64
		var oldest anyTime
		if err := rows.Scan(&id, &n, &oldest); err != nil {
			return nil, err
		}
		in := byID[id.String]
		if in == nil {
			in = &dialects.ConsoleInstance{ID: id.String}
			byID[id.String] = in
		}
		in.Claims, in.OldestClaim = in.Claims+n, minTime(in.OldestClaim, oldest.t)
	}
	if err := RowsErr(rows); err != nil {
		return nil, err
	}
	out := make([]dialects.ConsoleInstance, 0, len(byID))
	for _, in := range byID {
		out = append(out, *in)
	}
	slices.SortFunc(out, func(a, b dialects.ConsoleInstance) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// ConsolePageRows is how many DLQ rows one statement of a fingerprint
// view or of a fingerprint's act reads: a keyset page by the primary key,
// so that no statement holds a long read (SQLite's WAL checkpoints, MySQL's
// undo history) however large the DLQ.
const ConsolePageRows = 1000

// ConsoleFingerprints implements dialects.ConsoleInspector as PostgreSQL's
// statement answers: groups by (source, event type, dialects.ErrorClass of
// the last error, status), largest first, then by source, type, class and
// status; each group's sample error is the error of its row with the
// largest id (the newest), cut to dialects.ErrorClassChars characters.
//
// Rows read: exactly the rows matching f, once, in keyset pages of
// ConsolePageRows (so ⌈matching/ConsolePageRows⌉ statements); only the
// groups are held in memory, never the rows. There is no cap: a cap would
// make the counts wrong without saying so, and the counts are what the
// operator acts on. On a large DLQ narrow f (time range, type, status),
// which dlqWhere's indexes serve.
func (c Console) ConsoleFingerprints(ctx context.Context, db wsql.ContextExecutor, f dialects.DLQFilter, limit int) ([]dialects.ConsoleFingerprint, error) {
	type key struct {
		source, eventType, class, status string
	}
	groups := map[key]*dialects.ConsoleFingerprint{}
	var after *oncebox.EventID
	for {
		q := c.S.Errors(f, after, ConsolePageRows)
		rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return nil, err
		}
		n := 0
		for rows.Next() {
			var id oncebox.EventID
			var source, eventType, status string
			var moved anyTime
			var lastError sql.NullString
			if err := rows.Scan(&id, &source, &eventType, &status, &moved, &lastError); err != nil {
				_ = rows.Close()
				return nil, err
			}
			n++
			after = &id
			k := key{source, eventType, dialects.ErrorClass(lastError.String), status}
			g := groups[k]
			if g == nil {
				g = &dialects.ConsoleFingerprint{ConsoleGroup: dialects.ConsoleGroup{Source: oncebox.DLQSource(source),
					EventType: eventType, ErrorClass: k.class}, Status: oncebox.DLQStatus(status)}
				groups[k] = g
			}
			g.Count++
			// Rows come in id order: this one is the group's newest so far.
			g.SampleError = truncateChars(lastError.String, dialects.ErrorClassChars)
			if moved.t != nil && moved.t.After(g.LastMovedAt) {
				g.LastMovedAt = *moved.t
			}
		}
		if err := RowsErr(rows); err != nil {
			return nil, err
		}
		if n < ConsolePageRows {
			break
		}
	}
	out := make([]dialects.ConsoleFingerprint, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b dialects.ConsoleFingerprint) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Source, b.Source), cmp.Compare(a.EventType, b.EventType),
			cmp.Compare(a.ErrorClass, b.ErrorClass), cmp.Compare(a.Status, b.Status))
	})
	if len(out) > limit {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

// ConsoleFingerprintIDs implements dialects.ConsoleInspector: it pages
// through the rows of the group's source, type and statuses in id order,
// keeping those of its class, until limit ids or the end. Rows read: those
// of the group's source, type and statuses between after and the limit-th
// id of the class, in pages of limit rows; at most every row of that
// source, type and statuses after after, when the class is rare.
func (c Console) ConsoleFingerprintIDs(ctx context.Context, db wsql.ContextExecutor, g dialects.ConsoleGroup, statuses []oncebox.DLQStatus, after *oncebox.EventID, limit int) ([]oncebox.EventID, error) {
	var out []oncebox.EventID
	for {
		q := c.S.GroupErrors(g.Source, g.EventType, statuses, after, limit)
		rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
		if err != nil {
			return nil, err
		}
		n := 0
		for rows.Next() {
			var id oncebox.EventID
			var lastError sql.NullString
			if err := rows.Scan(&id, &lastError); err != nil {
				_ = rows.Close()
				return nil, err
			}
			n++
			after = &id
			if dialects.ErrorClass(lastError.String) == g.ErrorClass && len(out) < limit {
				out = append(out, id)
			}
		}
		if err := RowsErr(rows); err != nil {
			return nil, err
		}
		if n < limit || len(out) == limit {
			return out, nil
		}
	}
}

// ConsoleOutboxEvent implements dialects.ConsoleInspector.
func (c Console) ConsoleOutboxEvent(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (dialects.ConsoleEvent, bool, error) {
	q := c.S.OutboxEvent(id)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return dialects.ConsoleEvent{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return dialects.ConsoleEvent{}, false, RowsErr(rows)
	}
	var e dialects.ConsoleEvent
	var created, updated anyTime
	if err := rows.Scan(&e.Status, &e.RetryCount, &created, &updated); err != nil {
		return dialects.ConsoleEvent{}, false, err
	}
	if created.t != nil {
		e.CreatedAt = *created.t
	}
	if updated.t != nil {
		e.UpdatedAt = *updated.t
	}
	return e, true, RowsErr(rows)
}

// anyTime scans a time as the drivers give it: a time.Time (MySQL with
// parseTime, SQLite's declared TIMESTAMP columns), an INTEGER of unix
// microseconds (SQLite's aggregates, which lose the declared type), or
// NULL.
type anyTime struct{ t *time.Time }

func (a *anyTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		a.t = nil
	case time.Time:
		u := v.UTC()
		a.t = &u
	case int64:
		u := time.UnixMicro(v).UTC()
		a.t = &u
	default:
		return fmt.Errorf("sqlkit: a time column holds %T", v)
	}
	return nil
}

func minTime(a, b *time.Time) *time.Time {
	if a == nil || (b != nil && b.Before(*a)) {
		return b
	}
	return a
}

// truncateChars is s cut to its first n characters.
func truncateChars(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// ConsoleTypesSQL is the statement of ConsoleStatements.Types on t, with
// pNow and pSince the placeholders of now and processedSince.
func ConsoleTypesSQL(t dialects.Tables, pNow, pSince string) string {
	return `SELECT event_type,
       SUM(CASE WHEN status = 'PENDING' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'IN_PROCESS' THEN 1 ELSE 0 END),
       SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END),
       MIN(CASE WHEN status = 'PENDING' AND next_retry_at <= ` + pNow + ` THEN next_retry_at END),
       SUM(CASE WHEN status = 'PROCESSED' THEN 1 ELSE 0 END)
  FROM ` + t.Events + `
 WHERE status IN ('PENDING', 'IN_PROCESS', 'FAILED')
    OR (status = 'PROCESSED' AND updated_at >= ` + pSince + `)
 GROUP BY event_type
 ORDER BY event_type`
}

// ConsoleHeartbeats is ConsoleStatements.Heartbeats on t: every instance.
func ConsoleHeartbeats(t dialects.Tables) func() dialects.Query {
	return func() dialects.Query {
		return dialects.Query{SQL: "SELECT instance_id, heartbeat_at FROM " + t.Instances}
	}
}

// ConsoleClaims is ConsoleStatements.Claims on t: the IN_PROCESS rows by
// claimer.
func ConsoleClaims(t dialects.Tables) func() dialects.Query {
	return func() dialects.Query {
		return dialects.Query{SQL: "SELECT claimed_by, COUNT(*), MIN(claimed_at) FROM " + t.Events +
			" WHERE status = 'IN_PROCESS' GROUP BY claimed_by"}
	}
}

// ConsoleErrorsSQL is the statement of ConsoleStatements.Errors on t with
// the conditions conds (the filter's and the keyset's) and pLimit the
// limit's placeholder. Index: the primary key, in its order.
func ConsoleErrorsSQL(t dialects.Tables, conds []string, pLimit string) string {
	return "SELECT id, source, event_type, status, moved_at, last_error FROM " + t.DLQ + WhereClause(conds) +
		"\n ORDER BY id\n LIMIT " + pLimit
}

// ConsoleGroupErrorsSQL is the statement of ConsoleStatements.GroupErrors
// on t with the conditions conds and pLimit the limit's placeholder.
func ConsoleGroupErrorsSQL(t dialects.Tables, conds []string, pLimit string) string {
	return "SELECT id, last_error FROM " + t.DLQ + WhereClause(conds) + "\n ORDER BY id\n LIMIT " + pLimit
}

// ConsoleOutboxEventSQL is the statement of ConsoleStatements.OutboxEvent
// on t with pID the id's placeholder.
func ConsoleOutboxEventSQL(t dialects.Tables, pID string) string {
	return "SELECT status, retry_count, created_at, updated_at FROM " + t.Events + " WHERE id = " + pID
}
