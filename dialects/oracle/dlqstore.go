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

// dlqGet builds DLQGet's statement. handler_name reads ' ' where "" was
// stored (publisher rows): see docs/oracle.md.
func (d *Dialect) dlqGet(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT " + oracleDLQColumns + " FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)))
}

// dlqGetStatus builds DLQGetStatus's statement.
func (d *Dialect) dlqGetStatus(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("SELECT status FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)))
}

// oracleDLQListColumns reads the whole payload BLOB and its length: a
// DBMS_LOB.SUBSTR in SQL returns a RAW, limited to 2,000 bytes unless
// MAX_STRING_SIZE=EXTENDED, so the cut to DLQListPayloadBytes is made by
// DLQList's runner (sqlkit.DLQStore) after the read. An empty payload is
// stored as NULL (docs/oracle.md): its length is 0.
var oracleDLQListColumns = sqlkit.DlqListColumns("payload", "NVL(DBMS_LOB.GETLENGTH(payload), 0)")

// dlqList builds DLQList's statement: keyset pagination in (moved_at, id)
// order, spelled without row values; FETCH FIRST is fine in a plain read (no
// FOR UPDATE). Index: (moved_at, id), or (status, moved_at, id).
func (d *Dialect) dlqList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, nil)
	if after != nil {
		conds = append(conds, "(moved_at > "+b.T(after.MovedAt)+" OR (moved_at = "+b.T(after.MovedAt)+
			" AND id > "+b.P(d.EncodeID(after.ID))+"))")
	}
	return b.Query("SELECT " + oracleDLQListColumns + "\n  FROM " + d.tables.DLQ + sqlkit.WhereClause(conds) +
		"\n ORDER BY moved_at, id\n FETCH FIRST " + b.P(limit) + " ROWS ONLY")
}

// dlqCount builds DLQCount's statement.
func (d *Dialect) dlqCount(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, nil)
	return b.Query("SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds))
}

// dlqSetStatus builds DLQSetStatus's statement.
func (d *Dialect) dlqSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now) +
		"\n WHERE id = " + b.P(d.EncodeID(id)) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// dlqSetStatusMany builds DLQSetStatusMany's statement; more than 1,000 ids
// are split into OR-ed IN lists of one statement.
func (d *Dialect) dlqSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	return b.Query("UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now) +
		"\n WHERE " + idIn(&b, "id", ids, d) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// dlqSetStatusWhere builds DLQSetStatusWhere's statement.
func (d *Dialect) dlqSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now)
	conds := d.dlqWhere(&b, f, []string{b.In("status", sqlkit.StatusArgs(from))})
	return b.Query(set + sqlkit.WhereClause(conds))
}

// dlqDelete builds DLQDelete's statement.
func (d *Dialect) dlqDelete(id oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE id = " + b.P(d.EncodeID(id)) + " AND status <> 'IN_PROCESS'")
}

// dlqDeleteMany builds DLQDeleteMany's statement.
func (d *Dialect) dlqDeleteMany(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + idIn(&b, "id", ids, d) + " AND status <> 'IN_PROCESS'")
}

// dlqDeleteWhere builds DLQDeleteWhere's statement.
func (d *Dialect) dlqDeleteWhere(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := d.dlqWhere(&b, f, []string{"status <> 'IN_PROCESS'"})
	return b.Query("DELETE FROM " + d.tables.DLQ + sqlkit.WhereClause(conds))
}

// dlqStatements are the builders the DLQ store's runner runs.
func (d *Dialect) dlqStatements() sqlkit.DLQStatements {
	return sqlkit.DLQStatements{
		Get:            d.dlqGet,
		GetStatus:      d.dlqGetStatus,
		List:           d.dlqList,
		Count:          d.dlqCount,
		SetStatus:      d.dlqSetStatus,
		SetStatusMany:  d.dlqSetStatusMany,
		SetStatusWhere: d.dlqSetStatusWhere,
		Delete:         d.dlqDelete,
		DeleteMany:     d.dlqDeleteMany,
		DeleteWhere:    d.dlqDeleteWhere,
		MaxIDs:         oracleMaxIDsPerStatement,
	}
}
