package sqlite

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// dlqWhere appends the conditions of f to conds, binding their values with
// b, and returns them. Index: a filter on one status uses (status,
// moved_at, id); the others are applied to the rows of (moved_at, id).
func dlqWhere(b *binder, f dialects.DLQFilter, conds []string) []string {
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

// dlqGet builds DLQGet's statement: one row by its id, columns in the order
// of DLQRecord.ScanTargets. Index: the primary key.
func (d *Dialect) dlqGet(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT " + sqlkit.DlqColumns + " FROM " + d.tables.DLQ + " WHERE id = ?1",
		Args: []any{d.EncodeID(id)},
	}
}

// dlqGetStatus builds DLQGetStatus's statement: the status of one row, one
// text column, no row when it does not exist. Index: the primary key.
func (d *Dialect) dlqGetStatus(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT status FROM " + d.tables.DLQ + " WHERE id = ?1",
		Args: []any{d.EncodeID(id)},
	}
}

// sqliteDLQListColumns cuts the payload in SQL: substr of a BLOB counts
// bytes, and length of a BLOB is its size in bytes.
var sqliteDLQListColumns = sqlkit.DlqListColumns("substr(payload, 1, "+sqlkit.DlqListCap+")", "length(payload)")

// dlqList builds DLQList's statement: up to limit rows matching f in
// (moved_at, id) order, starting after the key when it is not nil (keyset
// pagination with a row-value comparison, an index range however deep the
// page). Index: (moved_at, id), or (status, moved_at, id) for one status.
// A plain read. Columns: DLQRecord.ListScanTargets, the payload cut to
// DLQListPayloadBytes.
func (d *Dialect) dlqList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	var b binder
	conds := dlqWhere(&b, f, nil)
	if after != nil {
		conds = append(conds, "(moved_at, id) > ("+b.T(after.MovedAt)+", "+b.P(d.EncodeID(after.ID))+")")
	}
	lim := b.P(limit)
	return b.Query("SELECT " + sqliteDLQListColumns + "\n  FROM " + d.tables.DLQ + sqlkit.WhereClause(conds) +
		"\n ORDER BY moved_at, id\n LIMIT " + lim)
}

// dlqCount builds DLQCount's statement: the number of rows matching f, one
// integer.
func (d *Dialect) dlqCount(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := dlqWhere(&b, f, nil)
	return b.Query("SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds))
}

// dlqSetStatus builds DLQSetStatus's statement: set one row to status to if
// its status is one of from; one affected row means changed. Under the
// write lock, a transfer that moved the row first has deleted it, and
// nothing is changed.
func (d *Dialect) dlqSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now)
	return b.Query(set + "\n WHERE id = " + b.P(d.EncodeID(id)) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// dlqSetStatusMany builds DLQSetStatusMany's statement: set the rows of ids
// whose status is one of from to status to; the affected count is the rows
// changed.
func (d *Dialect) dlqSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now)
	return b.Query(set + "\n WHERE " + b.In("id", d.ids(ids)) + " AND " + b.In("status", sqlkit.StatusArgs(from)))
}

// dlqSetStatusWhere builds DLQSetStatusWhere's statement: set every row
// matching f whose status is one of from to status to; the affected count
// is the rows changed. Index: as DLQList.
func (d *Dialect) dlqSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	var b binder
	set := "UPDATE " + d.tables.DLQ + " SET status = " + b.P(string(to)) + ", updated_at = " + b.T(now)
	conds := dlqWhere(&b, f, []string{b.In("status", sqlkit.StatusArgs(from))})
	return b.Query(set + sqlkit.WhereClause(conds))
}

// dlqDelete builds DLQDelete's statement: delete one row unless it is
// IN_PROCESS; one affected row means deleted.
func (d *Dialect) dlqDelete(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id = ?1 AND status <> 'IN_PROCESS'",
		Args: []any{d.EncodeID(id)},
	}
}

// dlqDeleteMany builds DLQDeleteMany's statement: delete the rows of ids
// that are not IN_PROCESS; the affected count is the rows deleted.
func (d *Dialect) dlqDeleteMany(ids []oncebox.EventID) dialects.Query {
	var b binder
	return b.Query("DELETE FROM " + d.tables.DLQ + " WHERE " + b.In("id", d.ids(ids)) + " AND status <> 'IN_PROCESS'")
}

// dlqDeleteWhere builds DLQDeleteWhere's statement: delete every row
// matching f that is not IN_PROCESS; the affected count is the rows
// deleted. Index: as DLQList.
func (d *Dialect) dlqDeleteWhere(f dialects.DLQFilter) dialects.Query {
	var b binder
	conds := dlqWhere(&b, f, []string{"status <> 'IN_PROCESS'"})
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
		MaxIDs:         maxIDsPerStatement,
	}
}
