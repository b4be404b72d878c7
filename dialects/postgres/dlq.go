package postgres

import (
	"strconv"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// dlqWhere appends the conditions of f to conds, binding their values into
// args, and returns both. Index: a filter on one status uses (status,
// moved_at, id); the others are applied to the rows of (moved_at, id).
func dlqWhere(f dialects.DLQFilter, conds []string, args []any) ([]string, []any) {
	next := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(f.Statuses) > 0 {
		conds = append(conds, "status = ANY("+next(dlqStatuses(f.Statuses))+"::text[])")
	}
	if f.EventType != "" {
		conds = append(conds, "event_type = "+next(f.EventType))
	}
	if f.Source != "" {
		conds = append(conds, "source = "+next(string(f.Source)))
	}
	if !f.MovedFrom.IsZero() {
		conds = append(conds, "moved_at >= "+next(f.MovedFrom))
	}
	if !f.MovedTo.IsZero() {
		conds = append(conds, "moved_at < "+next(f.MovedTo))
	}
	return conds, args
}

func dlqStatuses(ss []oncebox.DLQStatus) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// DLQGet implements Dialect: one row by its id, columns in the order of
// DLQRecord.ScanTargets. Index: the primary key.
func (d *Dialect) DLQGet(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT " + sqlkit.DlqColumns + " FROM " + d.tables.DLQ + " WHERE id = $1",
		Args: []any{d.EncodeID(id)},
	}
}

// DLQGetStatus implements Dialect: the status of one row, one text column,
// no row when it does not exist. Index: the primary key.
func (d *Dialect) DLQGetStatus(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT status FROM " + d.tables.DLQ + " WHERE id = $1",
		Args: []any{d.EncodeID(id)},
	}
}

// pgDLQListColumns cuts the payload in SQL: substring of a bytea reads
// only the first chunks of a TOASTed value (fetched by slices, decompressed
// only as far as needed) and octet_length reads its size from the TOAST
// header, so a page does not carry whole payloads.
var pgDLQListColumns = sqlkit.DlqListColumns("substring(payload FROM 1 FOR "+sqlkit.DlqListCap+")", "octet_length(payload)")

// DLQList implements Dialect: up to limit rows matching f in (moved_at, id)
// order, starting after the key when it is not nil (keyset pagination: the
// row-value comparison is an index range, however deep the page). Index:
// (moved_at, id), or (status, moved_at, id) for one status. No locks: a
// plain read. Columns: DLQRecord.ListScanTargets, the payload cut to
// DLQListPayloadBytes.
func (d *Dialect) DLQList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	conds, args := dlqWhere(f, nil, nil)
	if after != nil {
		args = append(args, after.MovedAt, d.EncodeID(after.ID))
		n := len(args)
		conds = append(conds, "(moved_at, id) > ($"+strconv.Itoa(n-1)+", $"+strconv.Itoa(n)+")")
	}
	args = append(args, limit)
	return dialects.Query{
		SQL: "SELECT " + pgDLQListColumns + "\n  FROM " + d.tables.DLQ + sqlkit.WhereClause(conds) +
			"\n ORDER BY moved_at, id\n LIMIT $" + strconv.Itoa(len(args)),
		Args: args,
	}
}

// DLQCount implements Dialect: the number of rows matching f, one integer.
func (d *Dialect) DLQCount(f dialects.DLQFilter) dialects.Query {
	conds, args := dlqWhere(f, nil, nil)
	return dialects.Query{SQL: "SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds), Args: args}
}

// DLQSetStatus implements Dialect: set one row to status to if its status is
// one of from; one affected row means changed. Locks: the row lock, which
// waits for a transfer holding the row; once that commits the row is gone
// and nothing is changed.
func (d *Dialect) DLQSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = $1, updated_at = $2
 WHERE id = $3 AND status = ANY($4::text[])`,
		Args: []any{string(to), now, d.EncodeID(id), dlqStatuses(from)},
	}
}

// DLQSetStatusMany implements Dialect: set the rows of ids whose status is
// one of from to status to; the affected count is the rows changed. Rows in
// another status, and rows a concurrent transfer removed, are not touched.
// Locks: row locks on the matching rows, taken in one statement.
func (d *Dialect) DLQSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = $1, updated_at = $2
 WHERE id = ANY($3::uuid[]) AND status = ANY($4::text[])`,
		Args: []any{string(to), now, d.idArray(ids), dlqStatuses(from)},
	}
}

// DLQSetStatusWhere implements Dialect: set every row matching f whose
// status is one of from to status to; the affected count is the rows
// changed. Locks: row locks on every matching row until the statement
// commits. Index: as DLQList.
func (d *Dialect) DLQSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	args := []any{string(to), now, dlqStatuses(from)}
	conds, args := dlqWhere(f, []string{"status = ANY($3::text[])"}, args)
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.DLQ + " SET status = $1, updated_at = $2" + sqlkit.WhereClause(conds),
		Args: args,
	}
}

// DLQDelete implements Dialect: delete one row unless it is IN_PROCESS; one
// affected row means deleted. Locks: as DLQSetStatus.
func (d *Dialect) DLQDelete(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id = $1 AND status <> 'IN_PROCESS'",
		Args: []any{d.EncodeID(id)},
	}
}

// DLQDeleteMany implements Dialect: delete the rows of ids that are not
// IN_PROCESS; the affected count is the rows deleted.
func (d *Dialect) DLQDeleteMany(ids []oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id = ANY($1::uuid[]) AND status <> 'IN_PROCESS'",
		Args: []any{d.idArray(ids)},
	}
}

// DLQDeleteWhere implements Dialect: delete every row matching f that is
// not IN_PROCESS; the affected count is the rows deleted. Index: as DLQList.
func (d *Dialect) DLQDeleteWhere(f dialects.DLQFilter) dialects.Query {
	conds, args := dlqWhere(f, []string{"status <> 'IN_PROCESS'"}, nil)
	return dialects.Query{SQL: "DELETE FROM " + d.tables.DLQ + sqlkit.WhereClause(conds), Args: args}
}

// dLQTransferToOutbox implements Dialect: up to limit TO_RETRY rows go back
// to the outbox as PENDING events due now, with retry_count 0, and leave the
// DLQ, in one statement and so in one transaction: a crash leaves each row
// on one side. The DLQ status IN_PROCESS is not used.
//
// The event id is the row's event_id, or, for a consumed message that had
// none, the DLQ row's own id (a UUIDv7 as well). The metadata's
// oncebox_event_id and oncebox_event_type are set to the event id and type
// sent, so the consumers' inboxes see the same id as before. A publisher row
// goes to its event_type and topic; a consumer row to the topic it was
// consumed from, under its event_type. Rows of one batch that share an event
// id (the same event parked by two handlers) become one outbox event: the
// latest moved row's content wins.
//
// When the event id is already in the outbox (a service whose consumer and
// producer share one schema: the event is there, PROCESSED), that row is
// re-armed: PENDING, retry_count 0, due now, claim cleared, content from the
// DLQ row. The affected count is the DLQ rows moved.
//
// Locks: FOR UPDATE SKIP LOCKED on the DLQ rows, so concurrent transfers on
// several instances take disjoint rows and never move one twice, and an
// operator's status change waits for (or is skipped by) the transfer, never
// overwritten. The re-arm takes the outbox row's lock. Index: (status,
// moved_at, id) gives the TO_RETRY rows in order.
func (d *Dialect) dLQTransferToOutbox(now time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: `WITH picked AS MATERIALIZED (
    SELECT id, COALESCE(event_id, id) AS event_id, event_type, topic, partition_key, message_uuid,
           payload, metadata, created_at, moved_at
      FROM ` + d.tables.DLQ + `
     WHERE status = 'TO_RETRY'
     ORDER BY moved_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
),
armed AS (
    INSERT INTO ` + d.tables.Events + ` AS e (id, event_type, topic, partition_key, message_uuid, payload,
        metadata, status, retry_count, next_retry_at, created_at, updated_at)
    SELECT DISTINCT ON (event_id) event_id, event_type, topic, partition_key, message_uuid, payload,
           metadata || jsonb_build_object('oncebox_event_id', event_id::text, 'oncebox_event_type', event_type),
           'PENDING', 0, $1, created_at, $1
      FROM picked
     ORDER BY event_id, moved_at DESC, id DESC
    ON CONFLICT (id) DO UPDATE
       SET event_type = EXCLUDED.event_type, topic = EXCLUDED.topic, partition_key = EXCLUDED.partition_key,
           message_uuid = EXCLUDED.message_uuid, payload = EXCLUDED.payload, metadata = EXCLUDED.metadata,
           status = 'PENDING', retry_count = 0, next_retry_at = EXCLUDED.next_retry_at,
           claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL,
           updated_at = EXCLUDED.updated_at
)
DELETE FROM ` + d.tables.DLQ + ` q
 USING picked
 WHERE q.id = picked.id`,
		Args: []any{now, limit},
	}
}

// DLQDeleteResolved implements Dialect: up to limit RESOLVED rows last
// updated (resolved) before cutoff. moved_at is never after updated_at, so
// the redundant moved_at bound lets the index (status, moved_at, id) range
// over the old RESOLVED rows only. Locks: SKIP LOCKED passes over rows an
// operator is changing right now.
func (d *Dialect) DLQDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	return dialects.Query{
		SQL: "DELETE FROM " + d.tables.DLQ + ` WHERE id IN (SELECT id FROM ` + d.tables.DLQ + `
 WHERE status = 'RESOLVED' AND moved_at < $1 AND updated_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		Args: []any{cutoff, limit},
	}
}
