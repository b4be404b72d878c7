package mysql

import (
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// mysqlDLQWhere appends the conditions of f to conds, binding their values
// into args, and returns both. Index: a filter on one status uses (status,
// moved_at, id); the others are applied to the rows of (moved_at, id).
func mysqlDLQWhere(f dialects.DLQFilter, conds []string, args []any) ([]string, []any) {
	if len(f.Statuses) > 0 {
		conds = append(conds, "status IN "+inList(len(f.Statuses)))
		for _, s := range f.Statuses {
			args = append(args, string(s))
		}
	}
	if f.EventType != "" {
		conds = append(conds, "event_type = ?")
		args = append(args, f.EventType)
	}
	if f.Source != "" {
		conds = append(conds, "source = ?")
		args = append(args, string(f.Source))
	}
	if !f.MovedFrom.IsZero() {
		conds = append(conds, "moved_at >= ?")
		args = append(args, sqlkit.MicroUTC(f.MovedFrom))
	}
	if !f.MovedTo.IsZero() {
		conds = append(conds, "moved_at < ?")
		args = append(args, sqlkit.MicroUTC(f.MovedTo))
	}
	return conds, args
}

// dlqGet builds DLQGet's statement. Index: the primary key.
func (d *Dialect) dlqGet(id oncebox.EventID) dialects.Query {
	return dialects.Query{SQL: "SELECT " + sqlkit.DlqColumns + " FROM " + d.tables.DLQ + " WHERE id = ?", Args: []any{d.EncodeID(id)}}
}

// dlqGetStatus builds DLQGetStatus's statement. Index: the primary key.
func (d *Dialect) dlqGetStatus(id oncebox.EventID) dialects.Query {
	return dialects.Query{SQL: "SELECT status FROM " + d.tables.DLQ + " WHERE id = ?", Args: []any{d.EncodeID(id)}}
}

// mysqlDLQListColumns cuts the payload in SQL, so the server sends at
// most DLQListPayloadBytes of it per row, and its LENGTH (bytes, a BLOB).
var mysqlDLQListColumns = sqlkit.DlqListColumns("SUBSTRING(payload, 1, "+sqlkit.DlqListCap+")", "LENGTH(payload)")

// dlqList builds DLQList's statement: keyset pagination in (moved_at, id)
// order. The key is spelled out as (moved_at > ? OR (moved_at = ? AND id >
// ?)): MySQL plans a row-value comparison (moved_at, id) > (?, ?) poorly,
// the expanded form is an index range on (moved_at, id) or (status,
// moved_at, id). No locks: a plain read. Columns: DLQRecord.ListScanTargets,
// the payload cut to DLQListPayloadBytes.
func (d *Dialect) dlqList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
	conds, args := mysqlDLQWhere(f, nil, nil)
	if after != nil {
		at := sqlkit.MicroUTC(after.MovedAt)
		conds = append(conds, "(moved_at > ? OR (moved_at = ? AND id > ?))")
		args = append(args, at, at, d.EncodeID(after.ID))
	}
	args = append(args, limit)
	return dialects.Query{
		SQL:  "SELECT " + mysqlDLQListColumns + "\n  FROM " + d.tables.DLQ + sqlkit.WhereClause(conds) + "\n ORDER BY moved_at, id\n LIMIT ?",
		Args: args,
	}
}

// dlqCount builds DLQCount's statement.
func (d *Dialect) dlqCount(f dialects.DLQFilter) dialects.Query {
	conds, args := mysqlDLQWhere(f, nil, nil)
	return dialects.Query{SQL: "SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds), Args: args}
}

// dlqSetStatus builds DLQSetStatus's statement. Locks: the row lock, which
// waits for a transfer holding the row; once that commits the row is gone
// and nothing is changed.
func (d *Dialect) dlqSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = ?, updated_at = ?
 WHERE id = ? AND status IN ` + inList(len(from)),
		Args: append([]any{string(to), sqlkit.MicroUTC(now), d.EncodeID(id)}, sqlkit.StatusArgs(from)...),
	}
}

// dlqSetStatusMany builds DLQSetStatusMany's statement.
func (d *Dialect) dlqSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	args := append([]any{string(to), sqlkit.MicroUTC(now)}, d.ids(ids)...)
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = ?, updated_at = ?
 WHERE id IN ` + inList(len(ids)) + ` AND status IN ` + inList(len(from)),
		Args: append(args, sqlkit.StatusArgs(from)...),
	}
}

// dlqSetStatusWhere builds DLQSetStatusWhere's statement. Locks: row locks
// on every matching row until the statement commits. Index: as DLQList.
func (d *Dialect) dlqSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	args := append([]any{string(to), sqlkit.MicroUTC(now)}, sqlkit.StatusArgs(from)...)
	conds, args := mysqlDLQWhere(f, []string{"status IN " + inList(len(from))}, args)
	return dialects.Query{SQL: "UPDATE " + d.tables.DLQ + " SET status = ?, updated_at = ?" + sqlkit.WhereClause(conds), Args: args}
}

// dlqDelete builds DLQDelete's statement.
func (d *Dialect) dlqDelete(id oncebox.EventID) dialects.Query {
	return dialects.Query{SQL: "DELETE FROM " + d.tables.DLQ + " WHERE id = ? AND status <> 'IN_PROCESS'", Args: []any{d.EncodeID(id)}}
}

// dlqDeleteMany builds DLQDeleteMany's statement.
func (d *Dialect) dlqDeleteMany(ids []oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id IN " + inList(len(ids)) + " AND status <> 'IN_PROCESS'",
		Args: d.ids(ids),
	}
}

// dlqDeleteWhere builds DLQDeleteWhere's statement. Index: as DLQList.
func (d *Dialect) dlqDeleteWhere(f dialects.DLQFilter) dialects.Query {
	conds, args := mysqlDLQWhere(f, []string{"status <> 'IN_PROCESS'"}, nil)
	return dialects.Query{SQL: "DELETE FROM " + d.tables.DLQ + sqlkit.WhereClause(conds), Args: args}
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
		MaxIDs:         mysqlMaxIDsPerStatement,
	}
}
