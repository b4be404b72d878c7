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

// dlqGet builds DLQGet's statement: one row by its id, columns in the order
// of DLQRecord.ScanTargets. Index: the primary key.
func (d *Dialect) dlqGet(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "SELECT " + sqlkit.DlqColumns + " FROM " + d.tables.DLQ + " WHERE id = $1",
		Args: []any{d.EncodeID(id)},
	}
}

// dlqGetStatus builds DLQGetStatus's statement: the status of one row, one
// text column, no row when it does not exist. Index: the primary key.
func (d *Dialect) dlqGetStatus(id oncebox.EventID) dialects.Query {
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

// dlqList builds DLQList's statement: up to limit rows matching f in
// (moved_at, id) order, starting after the key when it is not nil (keyset
// pagination: the row-value comparison is an index range, however deep the
// page). Index: (moved_at, id), or (status, moved_at, id) for one status. No
// locks: a plain read. Columns: DLQRecord.ListScanTargets, the payload cut
// to DLQListPayloadBytes.
func (d *Dialect) dlqList(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query {
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

// dlqCount builds DLQCount's statement: the number of rows matching f, one
// integer.
func (d *Dialect) dlqCount(f dialects.DLQFilter) dialects.Query {
	conds, args := dlqWhere(f, nil, nil)
	return dialects.Query{SQL: "SELECT count(*) FROM " + d.tables.DLQ + sqlkit.WhereClause(conds), Args: args}
}

// dlqSetStatus builds DLQSetStatus's statement: set one row to status to if
// its status is one of from; one affected row means changed. Locks: the row
// lock, which waits for a transfer holding the row; once that commits the
// row is gone and nothing is changed.
func (d *Dialect) dlqSetStatus(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = $1, updated_at = $2
 WHERE id = $3 AND status = ANY($4::text[])`,
		Args: []any{string(to), now, d.EncodeID(id), dlqStatuses(from)},
	}
}

// dlqSetStatusMany builds DLQSetStatusMany's statement: set the rows of ids
// whose status is one of from to status to; the affected count is the rows
// changed. Rows in another status, and rows a concurrent transfer removed,
// are not touched. Locks: row locks on the matching rows, taken in one
// statement.
func (d *Dialect) dlqSetStatusMany(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	return dialects.Query{
		SQL: "UPDATE " + d.tables.DLQ + ` SET status = $1, updated_at = $2
 WHERE id = ANY($3::uuid[]) AND status = ANY($4::text[])`,
		Args: []any{string(to), now, d.idArray(ids), dlqStatuses(from)},
	}
}

// dlqSetStatusWhere builds DLQSetStatusWhere's statement: set every row
// matching f whose status is one of from to status to; the affected count is
// the rows changed. Locks: row locks on every matching row until the
// statement commits. Index: as DLQList.
func (d *Dialect) dlqSetStatusWhere(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query {
	args := []any{string(to), now, dlqStatuses(from)}
	conds, args := dlqWhere(f, []string{"status = ANY($3::text[])"}, args)
	return dialects.Query{
		SQL:  "UPDATE " + d.tables.DLQ + " SET status = $1, updated_at = $2" + sqlkit.WhereClause(conds),
		Args: args,
	}
}

// dlqDelete builds DLQDelete's statement: delete one row unless it is
// IN_PROCESS; one affected row means deleted. Locks: as DLQSetStatus.
func (d *Dialect) dlqDelete(id oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id = $1 AND status <> 'IN_PROCESS'",
		Args: []any{d.EncodeID(id)},
	}
}

// dlqDeleteMany builds DLQDeleteMany's statement: delete the rows of ids
// that are not IN_PROCESS; the affected count is the rows deleted.
func (d *Dialect) dlqDeleteMany(ids []oncebox.EventID) dialects.Query {
	return dialects.Query{
		SQL:  "DELETE FROM " + d.tables.DLQ + " WHERE id = ANY($1::uuid[]) AND status <> 'IN_PROCESS'",
		Args: []any{d.idArray(ids)},
	}
}

// dlqDeleteWhere builds DLQDeleteWhere's statement: delete every row
// matching f that is not IN_PROCESS; the affected count is the rows deleted.
// Index: as DLQList.
func (d *Dialect) dlqDeleteWhere(f dialects.DLQFilter) dialects.Query {
	conds, args := dlqWhere(f, []string{"status <> 'IN_PROCESS'"}, nil)
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
	}
}
