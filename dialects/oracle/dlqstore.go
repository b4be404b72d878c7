package oracle

import (
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
