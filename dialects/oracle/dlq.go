package oracle

import (
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// oracleDLQColumns is the select list of DLQGet, in the order of
// DLQRecord.ScanTargets.
const oracleDLQColumns = sqlkit.DlqColumns

// where appends the conditions of f to conds. Index: a filter on one status
// uses (status, moved_at, id); the others are applied to the rows of
// (moved_at, id).
func (d *Dialect) dlqWhere(b *binder, f dialects.DLQFilter, conds []string) []string {
	if len(f.Statuses) > 0 {
		conds = append(conds, b.In("status", sqlkit.StatusArgs(f.Statuses)))
	}
	if f.EventType != "" {
		conds = append(conds, "event_type = "+b.P(f.EventType))
	}
	if f.Source != "" {
		conds = append(conds, "source = "+b.P(string(f.Source)))
	}
	if !f.MovedFrom.IsZero() {
		conds = append(conds, "moved_at >= "+b.T(f.MovedFrom))
	}
	if !f.MovedTo.IsZero() {
		conds = append(conds, "moved_at < "+b.T(f.MovedTo))
	}
	return conds
}

// DLQGet implements Dialect. handler_name reads ' ' where "" was stored
// (publisher rows): see docs/oracle.md.
func (d *Dialect) DLQGet(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT " + oracleDLQColumns + " FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)))
}

// DLQGetStatus implements Dialect.
func (d *Dialect) DLQGetStatus(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT status FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)))
}

// oracleDLQListColumns reads the whole payload BLOB and its length: a
// DBMS_LOB.SUBSTR in SQL returns a RAW, limited to 2,000 bytes unless
// MAX_STRING_SIZE=EXTENDED, so the cut to DLQListPayloadBytes is made by
// the caller (package dlq) after the read. An empty payload is stored as
// NULL (docs/oracle.md): its length is 0.
var oracleDLQListColumns = sqlkit.DlqListColumns("payload", "NVL(DBMS_LOB.GETLENGTH(payload), 0)")

// DLQList implements Dialect: keyset pagination in (moved_at, id) order,
// spelled without row values; FETCH FIRST is fine in a plain read (no FOR
// UPDATE). Index: (moved_at, id), or (status, moved_at, id).
func (d *Dialect) DLQList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, nil)
	if after != nil {
		conds = append(conds, "(moved_at > "+b.T(after.MovedAt)+" OR (moved_at = "+b.T(after.MovedAt)+
			" AND id > "+b.P(d.EncodeID(after.ID))+"))")
	}
	return b.Query("SELECT " + oracleDLQListColumns + "\n  FROM " + d.tables.DLQ + sqlkit.WhereClause(conds) +
		"\n ORDER BY moved_at, id\n FETCH FIRST " + b.P(limit) + " ROWS ONLY")
}

// DLQCount implements Dialect.
func (d *Dialect) DLQCount(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, nil)
	return b.Query("SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds))
}

// DLQSetStatus implements Dialect.
func (d *Dialect) DLQSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now) +
		"\n WHERE id = " + b.P(d.EncodeID(id)) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// DLQSetStatusMany implements Dialect; more than 1,000 ids are split into
// OR-ed IN lists of one statement.
func (d *Dialect) DLQSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now) +
		"\n WHERE " + idIn(&b, "id", ids, d) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// DLQSetStatusWhere implements Dialect.
func (d *Dialect) DLQSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now)
	conds := d.dlqWhere(&b, f, []string{b.In("status", sqlkit.StatusArgs(from))})
	return b.Query(set + sqlkit.WhereClause(conds))
}

// DLQDelete implements Dialect.
func (d *Dialect) DLQDelete(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)) + " AND status <> 'IN_PROCESS'")
}

// DLQDeleteMany implements Dialect.
func (d *Dialect) DLQDeleteMany(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + idIn(&b, "id", ids, d) + " AND status <> 'IN_PROCESS'")
}

// DLQDeleteWhere implements Dialect.
func (d *Dialect) DLQDeleteWhere(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, []string{"status <> 'IN_PROCESS'"})
	return b.Query("DELETE FROM " + d.tables.DLQ + sqlkit.WhereClause(conds))
}

// DLQDeleteResolved implements Dialect: up to limit RESOLVED rows updated
// before cutoff, through a ROWNUM-bounded ROWID subquery; the outer
// predicate is checked again on each row, so a row an operator changed in
// between is not deleted. One leased instance runs the job: no SKIP LOCKED
// fairness is needed.
func (d *Dialect) DLQDeleteResolved(cutoff time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + "\n WHERE status = 'RESOLVED' AND updated_at < " + b.T(cutoff) +
		"\n   AND ROWID IN (SELECT ROWID FROM " + d.tables.DLQ +
		"\n                  WHERE status = 'RESOLVED' AND moved_at < " + b.T(cutoff) + " AND updated_at < " + b.T(cutoff) +
		" AND ROWNUM <= " + b.P(limit) + ")")
}

// dLQTransferLock is TransferDLQToOutbox's cursor over the TO_RETRY rows in
// (moved_at, id) order, FOR UPDATE SKIP LOCKED, fetched up to the limit.
// Index: (status, moved_at, id).
// dLQToRetryProbe tells, without locking, whether a TO_RETRY row waits: an
// idle TransferDLQToOutbox run stops there.
func (d *Dialect) dLQToRetryProbe() dialects.Query {
	return dialects.Query{SQL: "SELECT 1 FROM " + d.tables.DLQ + " WHERE status = 'TO_RETRY' AND ROWNUM = 1"}
}

func (d *Dialect) dLQTransferLock() dialects.Query {
	return dialects.Query{SQL: "SELECT id, event_id, event_type, topic, partition_key, message_uuid, payload, metadata, created_at, moved_at" +
		"\n  FROM " + d.tables.DLQ + "\n WHERE status = 'TO_RETRY'\n ORDER BY moved_at, id\n   FOR UPDATE SKIP LOCKED"}
}

// dLQTransferRearm re-arms the outbox row of r's event id, if any, as
// PostgreSQL's ON CONFLICT DO UPDATE does: content from the DLQ row,
// PENDING, retry_count 0, due now, claim and failure cleared. One affected
// row means it existed; otherwise dLQTransferInsert inserts it. (Two
// statements, not a MERGE: the payload and metadata are LOBs, whose binds
// beyond 32 KB go-ora sends as LONG, which a MERGE's USING subquery does not
// take.)
func (d *Dialect) dLQTransferRearm(r dialects.EventRow, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.Events + " SET event_type = " + b.P(r.EventType) + ", topic = " + b.P(r.Topic) +
		", partition_key = " + b.P(sqlkit.Nullable(r.Key)) + ",\n       message_uuid = " + b.P(r.MessageUUID) +
		", payload = " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", metadata = " + b.P(r.Metadata) +
		",\n       status = 'PENDING', retry_count = 0, next_retry_at = " + b.T(now) +
		",\n       claim_token = NULL, claimed_at = NULL, first_failed_at = NULL, last_error = NULL, updated_at = " + b.T(now) +
		"\n WHERE id = " + b.P(d.EncodeID(r.ID)))
}

// dLQTransferInsert inserts r into the outbox as a PENDING event due now.
func (d *Dialect) dLQTransferInsert(r dialects.EventRow, now time.Time) dialects.Query {
	var b binder
	return b.Query("INSERT INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\nVALUES (" +
		b.P(d.EncodeID(r.ID)) + ", " + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " + b.P(sqlkit.Nullable(r.Key)) + ", " +
		b.P(r.MessageUUID) + ", " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " + b.P(r.Metadata) + ", 'PENDING', 0, " +
		b.T(now) + ", " + b.T(r.CreatedAt) + ", " + b.T(now) + ")")
}

// dLQTransferDelete removes the transferred rows from the DLQ.
func (d *Dialect) dLQTransferDelete(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + idIn(&b, "id", ids, d))
}

// InboxInsert implements Dialect: a MERGE that inserts (consumer, id) when
// not present; one affected row means new. consumer "" (the default
// namespace) and id "" are stored as ' ' (Oracle's "" is NULL). A concurrent
// uncommitted insert of the same key makes the MERGE wait; if that
// transaction commits, the MERGE fails with ORA-00001 instead of affecting
// nothing (InboxRecordMany turns that into "not new"; a single InboxInsert
// returns the error, and the message is redelivered and then found).
func (d *Dialect) InboxInsert(consumer, id string, now time.Time) dialects.Query {
	var b binder
	return b.Query("MERGE INTO " + d.tables.Inbox + " i\nUSING (SELECT " + b.P(oraText(consumer)) + " AS consumer, " +
		b.P(oraText(id)) + " AS event_id, " + b.T(now) + ` AS processed_at FROM DUAL) s
   ON (i.consumer = s.consumer AND i.event_id = s.event_id)
 WHEN NOT MATCHED THEN INSERT (consumer, event_id, processed_at) VALUES (s.consumer, s.event_id, s.processed_at)`)
}

// InboxDeleteBefore implements Dialect: up to limit ids processed before
// cutoff, through a ROWNUM-bounded ROWID subquery (inbox rows are never
// updated; one leased instance runs the clean-up). Index: (processed_at).
func (d *Dialect) InboxDeleteBefore(cutoff time.Time, limit int) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.Inbox + " WHERE ROWID IN (SELECT ROWID FROM " + d.tables.Inbox +
		"\n WHERE processed_at < " + b.T(cutoff) + " AND ROWNUM <= " + b.P(limit) + ")")
}

// DLQUpsertConsumer implements Dialect: a MERGE on the key the unique
// indexes enforce, (event_id, source, handler_name), or (message_uuid,
// source, handler_name) for a message without an event id; a row already
// there counts one more attempt. handler_name "" is stored as ' '. Two
// concurrent MERGEs of a new key: one fails with ORA-00001 (PostgreSQL's ON
// CONFLICT would update instead); the message is redelivered and counted
// then.
func (d *Dialect) DLQUpsertConsumer(r dialects.DLQRow) dialects.Query {
	var b binder
	key := sqlkit.Nullable(r.Key)
	var eventID any
	// The ON conditions spell the expressions of the function-based unique
	// indexes, so that the MERGE finds the row through them.
	on := "CASE WHEN q.event_id IS NOT NULL THEN q.event_id END = s.event_id" +
		"\n       AND CASE WHEN q.event_id IS NOT NULL THEN q.source END = 'consumer'" +
		"\n       AND CASE WHEN q.event_id IS NOT NULL THEN q.handler_name END = s.handler_name"
	if r.EventID != nil {
		eventID = d.EncodeID(*r.EventID)
	} else {
		on = "CASE WHEN q.event_id IS NULL THEN q.message_uuid END = s.message_uuid" +
			"\n       AND CASE WHEN q.event_id IS NULL THEN q.source END = 'consumer'" +
			"\n       AND CASE WHEN q.event_id IS NULL THEN q.handler_name END = s.handler_name"
	}
	using := "SELECT " + b.P(d.EncodeID(r.ID)) + " AS id, " + b.P(eventID) + " AS event_id, " +
		b.P(oraText(r.HandlerName)) + " AS handler_name, " + b.P(r.MessageUUID) + " AS message_uuid, " +
		b.T(r.FailedAt) + " AS failed_at FROM DUAL"
	var s strings.Builder
	s.WriteString("MERGE INTO " + d.tables.DLQ + " q\nUSING (" + using + ") s\n   ON (" + on + ")")
	s.WriteString("\n WHEN MATCHED THEN UPDATE SET q.retry_count = q.retry_count + 1, q.last_error = " + b.P(sqlkit.ErrorText(r.Error)) +
		",\n      q.last_failed_at = s.failed_at, q.updated_at = s.failed_at")
	s.WriteString(`
 WHEN NOT MATCHED THEN INSERT (id, event_id, source, handler_name, event_type, topic, partition_key,
      message_uuid, payload, metadata, status, retry_count, last_error, created_at, first_failed_at,
      last_failed_at, moved_at, updated_at)
      VALUES (s.id, s.event_id, 'consumer', s.handler_name, ` + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " + b.P(key) +
		",\n      s.message_uuid, " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " + b.P(r.Metadata) + ", 'MOVED', 1, " + b.P(sqlkit.ErrorText(r.Error)) +
		",\n      s.failed_at, s.failed_at, s.failed_at, s.failed_at, s.failed_at)")
	return b.Query(s.String())
}

// DLQConsumerPayload implements Dialect. The conditions spell the
// expressions of the function-based unique index on (event_id, source,
// handler_name), so that the lookup goes through it; ” is stored as ' '.
func (d *Dialect) DLQConsumerPayload(eventID oncebox.EventID, handler string) dialects.Query {
	var b binder
	return b.Query("SELECT payload FROM " + d.tables.DLQ +
		"\n WHERE CASE WHEN event_id IS NOT NULL THEN event_id END = " + b.P(d.EncodeID(eventID)) +
		"\n   AND CASE WHEN event_id IS NOT NULL THEN source END = 'consumer'" +
		"\n   AND CASE WHEN event_id IS NOT NULL THEN handler_name END = " + b.P(oraText(handler)))
}
