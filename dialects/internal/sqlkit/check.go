package sqlkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// CheckSchema tells whether db can serve d's tables: the database answers,
// every migration of d has been applied, and a timestamp reads back as a
// time (MySQL's DSN needs parseTime=true). The relay runs it when it
// starts, so that a relay whose database cannot work returns an error from
// Run instead of logging the same failure forever. Its one statement reads
// the migrations table, which every dialect names the same way.
func CheckSchema(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect) error {
	migrations, err := d.Migrations()
	if err != nil {
		return err
	}
	table := d.Tables().Migrations
	rows, err := db.QueryContext(ctx, "SELECT version, applied_at FROM "+table+" ORDER BY version")
	if err != nil {
		if missingTable(err) {
			return fmt.Errorf("oncebox: cannot read %s (has migrate.Migrate run on this database and schema?): %w", table, err)
		}
		return fmt.Errorf("oncebox: cannot read %s: %w", table, err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		var at time.Time
		if err := rows.Scan(&v, &at); err != nil {
			return fmt.Errorf("oncebox: cannot read %s: %w", table, ScanHint(err))
		}
		applied[v] = true
	}
	if err := RowsErr(rows); err != nil {
		return fmt.Errorf("oncebox: cannot read %s: %w", table, err)
	}
	for _, m := range migrations {
		if !applied[m.Version] {
			return fmt.Errorf("oncebox: migration %d (%s) is not applied to %s: run migrate.Migrate (or apply it by hand) before starting the relay",
				m.Version, m.Name, table)
		}
	}
	return nil
}

// missingTable reports whether err says that a table does not exist, in
// the words of any supported database's driver (this package links none):
// PostgreSQL's SQLSTATE 42P01, MySQL's error 1146, SQLite's "no such
// table", Oracle's ORA-00942. A connection refused, a timeout or a
// permission error is not, and gets no migration hint.
func missingTable(err error) bool {
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) && coded.SQLState() == "42P01" {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"(SQLSTATE 42P01)", "Error 1146", "no such table", "ORA-00942"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
