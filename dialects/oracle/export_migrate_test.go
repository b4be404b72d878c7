package oracle

import (
	"time"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// The builders of the migrator's and the inspector's statements, for the
// golden tests (package oracle_test), named after what they build.

func (d *Dialect) MigrationLockSQL() []dialects.Query { return d.migrationLock() }

func (d *Dialect) MigrationUnlockSQL() []dialects.Query { return d.migrationUnlock() }

func (d *Dialect) SchemaCreateSQL() []dialects.Query { return d.schemaCreate() }

func (d *Dialect) MigrationsTableCreateSQL() dialects.Query { return d.migrationsTableCreate() }

func (d *Dialect) MigrationsSelectSQL() dialects.Query { return d.migrationsSelect() }

func (d *Dialect) MigrationsInsertSQL(version int, name string, at time.Time) dialects.Query {
	return d.migrationsInsert(version, name, at)
}

func (d *Dialect) BacklogSQL() dialects.Query { return d.backlog() }

func (d *Dialect) EventsListSQL() dialects.Query { return d.eventsList() }
