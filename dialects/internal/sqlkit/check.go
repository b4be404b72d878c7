package sqlkit

import (
	"context"
	"fmt"
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
		return fmt.Errorf("oncebox: cannot read %s (has migrate.Migrate run on this database and schema?): %w", table, err)
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
