package sqlkit

import (
	"context"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// DLQStatements are a database's builders of the DLQ store's statements,
// one for each method of dialects.DLQStore, and the most ids one statement
// of SetStatusMany or DeleteMany takes.
type DLQStatements struct {
	// Get selects one row by id, columns in the order of
	// DLQRecord.ScanTargets; no row when it does not exist.
	Get func(id oncebox.EventID) dialects.Query
	// GetStatus selects the status of one row, one text column; no row
	// when it does not exist.
	GetStatus func(id oncebox.EventID) dialects.Query
	// List selects up to limit rows matching f in (moved_at, id) order,
	// after the key when it is not nil, columns in the order of
	// DLQRecord.ListScanTargets: the payload cut to DLQListPayloadBytes
	// where the database can, then its full size.
	List func(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query
	// Count counts the rows matching f, one integer.
	Count func(f dialects.DLQFilter) dialects.Query
	// SetStatus sets row id to status to if its status is one of from; one
	// affected row means changed.
	SetStatus func(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	// SetStatusMany sets the rows of ids (at most MaxIDs of them) whose
	// status is one of from to status to; the affected count is the rows
	// changed.
	SetStatusMany func(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	// SetStatusWhere sets the rows matching f whose status is one of from
	// to status to; the affected count is the rows changed.
	SetStatusWhere func(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	// Delete deletes row id unless it is IN_PROCESS; one affected row means
	// deleted.
	Delete func(id oncebox.EventID) dialects.Query
	// DeleteMany deletes the rows of ids (at most MaxIDs of them) that are
	// not IN_PROCESS; the affected count is the rows deleted.
	DeleteMany func(ids []oncebox.EventID) dialects.Query
	// DeleteWhere deletes the rows matching f that are not IN_PROCESS; the
	// affected count is the rows deleted.
	DeleteWhere func(f dialects.DLQFilter) dialects.Query
	// MaxIDs is the most ids one statement of SetStatusMany or DeleteMany
	// takes (the database's limit on bind parameters); 0 for no limit.
	MaxIDs int
}

// DLQStore runs the DLQ store's statements built by S: it implements
// dialects.DLQStore for every database that embeds it.
type DLQStore struct{ S DLQStatements }

// DLQGet implements dialects.DLQStore.
func (r DLQStore) DLQGet(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (dialects.DLQRecord, bool, error) {
	recs, err := queryDLQRecords(ctx, db, r.S.Get(id), false)
	if err != nil || len(recs) == 0 {
		return dialects.DLQRecord{}, false, err
	}
	return recs[0], true, nil
}

// DLQGetStatus implements dialects.DLQStore.
func (r DLQStore) DLQGetStatus(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (oncebox.DLQStatus, bool, error) {
	q := r.S.GetStatus(id)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return "", false, err
	}
	defer rows.Close()
	var st string
	found := rows.Next()
	if found {
		if err := rows.Scan(&st); err != nil {
			return "", false, err
		}
	}
	if err := RowsErr(rows); err != nil {
		return "", false, err
	}
	return oncebox.DLQStatus(st), found, nil
}

// DLQList implements dialects.DLQStore. A database that cannot cut the
// payload in SQL (Oracle) reads it whole, and it is cut here.
func (r DLQStore) DLQList(ctx context.Context, db wsql.ContextExecutor, f dialects.DLQFilter, after *dialects.DLQKey, limit int) ([]dialects.DLQRecord, error) {
	recs, err := queryDLQRecords(ctx, db, r.S.List(f, after, limit), true)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if p := recs[i].Payload; len(p) > dialects.DLQListPayloadBytes {
			recs[i].Payload = p[:dialects.DLQListPayloadBytes:dialects.DLQListPayloadBytes]
		}
	}
	return recs, nil
}

// DLQCount implements dialects.DLQStore.
func (r DLQStore) DLQCount(ctx context.Context, db wsql.ContextExecutor, f dialects.DLQFilter) (int, error) {
	q := r.S.Count(f)
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return 0, err
		}
	}
	if err := RowsErr(rows); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DLQSetStatus implements dialects.DLQStore.
func (r DLQStore) DLQSetStatus(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (bool, error) {
	n, err := ExecAffected(ctx, db, r.S.SetStatus(id, to, from, now))
	return n > 0, err
}

// DLQSetStatusMany implements dialects.DLQStore: one statement for each
// S.MaxIDs ids.
func (r DLQStore) DLQSetStatusMany(ctx context.Context, db wsql.ContextExecutor, ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (int64, error) {
	var total int64
	err := Chunks(ids, r.S.MaxIDs, func(part []oncebox.EventID) error {
		n, err := ExecAffected(ctx, db, r.S.SetStatusMany(part, to, from, now))
		total += n
		return err
	})
	return total, err
}

// DLQSetStatusWhere implements dialects.DLQStore.
func (r DLQStore) DLQSetStatusWhere(ctx context.Context, db wsql.ContextExecutor, f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) (int64, error) {
	return ExecAffected(ctx, db, r.S.SetStatusWhere(f, to, from, now))
}

// DLQDelete implements dialects.DLQStore.
func (r DLQStore) DLQDelete(ctx context.Context, db wsql.ContextExecutor, id oncebox.EventID) (bool, error) {
	n, err := ExecAffected(ctx, db, r.S.Delete(id))
	return n > 0, err
}

// DLQDeleteMany implements dialects.DLQStore: one statement for each
// S.MaxIDs ids.
func (r DLQStore) DLQDeleteMany(ctx context.Context, db wsql.ContextExecutor, ids []oncebox.EventID) (int64, error) {
	var total int64
	err := Chunks(ids, r.S.MaxIDs, func(part []oncebox.EventID) error {
		n, err := ExecAffected(ctx, db, r.S.DeleteMany(part))
		total += n
		return err
	})
	return total, err
}

// DLQDeleteWhere implements dialects.DLQStore.
func (r DLQStore) DLQDeleteWhere(ctx context.Context, db wsql.ContextExecutor, f dialects.DLQFilter) (int64, error) {
	return ExecAffected(ctx, db, r.S.DeleteWhere(f))
}

// queryDLQRecords runs q and scans every row; listing tells a List
// statement, whose columns end with the payload's size.
func queryDLQRecords(ctx context.Context, db wsql.ContextExecutor, q dialects.Query, listing bool) ([]dialects.DLQRecord, error) {
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []dialects.DLQRecord
	for rows.Next() {
		var rec dialects.DLQRecord
		targets := rec.ScanTargets()
		if listing {
			targets = rec.ListScanTargets()
		}
		if err := rows.Scan(targets...); err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, RowsErr(rows)
}
