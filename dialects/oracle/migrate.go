package oracle

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// CheckSchema implements dialects.Dialect.
func (d *Dialect) CheckSchema(ctx context.Context, db wsql.ContextExecutor) error {
	return sqlkit.CheckSchema(ctx, db, d)
}

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// oracleLockName is the DBMS_LOCK name of the migration lock, after the
// migrations table so that schemas migrated side by side do not wait on each
// other. DBMS_LOCK names are at most 128 bytes: a longer one is replaced by
// a hash of it.
func oracleLockName(migrations string) string {
	name := "oncebox-migrate:" + strings.ToUpper(migrations)
	if len(name) > 128 {
		name = "oncebox-migrate:" + strconv.FormatUint(uint64(sqlkit.AdvisoryKey(name)), 16)
	}
	return name
}

// Migrations implements Dialect. The script is split at lines holding only
// "/" (splitOracleScript), not by sqlkit.SplitStatements: each statement is a
// PL/SQL block with semicolons at the end of inner lines.
func (d *Dialect) Migrations() ([]dialects.Migration, error) {
	return sqlkit.RenderMigrations(migrationsFS, "migrations", d.templateData(), splitOracleScript)
}

// oracleTemplateData is what the Oracle migrations are rendered with: the
// tables, and IndexPrefix, the prefix of index names qualified with the
// schema. (On Oracle an index named without a schema is created in the
// connected user's schema, not in its table's.)
type oracleTemplateData struct {
	dialects.Tables
	IndexPrefix string
}

func (d *Dialect) templateData() oracleTemplateData {
	p := d.tables.Prefix
	if d.schema != "" {
		p = d.schema + "." + p
	}
	return oracleTemplateData{Tables: d.tables, IndexPrefix: p}
}

// splitOracleScript splits a script into statements at every line holding
// only "/" (the SQL*Plus terminator). Comment lines before a statement are
// dropped; the statement text is kept whole, with the final "END;" that a
// PL/SQL block needs (a plain SQL statement must not end with ";").
func splitOracleScript(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "/" {
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
			continue
		}
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		cur.WriteString(line)
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// oracleLockTimeout is how long, in seconds, a migrator waits for another
// instance's migration.
const oracleLockTimeout = 600

// migrator returns the runner of the migration steps over this dialect's
// statements. A script ends each statement with a line holding "/", as
// SQL*Plus, SQLcl and Flyway read PL/SQL blocks; the recording statement
// wraps the time in SYS_EXTRACT_UTC.
func (d *Dialect) migrator() sqlkit.Migrator {
	return sqlkit.Migrator{
		S: sqlkit.MigratorStatements{
			Lock:             d.migrationLock,
			Unlock:           d.migrationUnlock,
			SchemaCreate:     d.schemaCreate,
			TableCreate:      d.migrationsTableCreate,
			Applied:          d.migrationsSelect,
			Record:           d.migrationsInsert,
			TestSchemaCreate: d.testSchema,
			TestSchemaDrop:   d.testSchema,
		},
		Script: sqlkit.ScriptForm{Database: "Oracle", End: "\n/", Now: "SYSTIMESTAMP"},
	}
}

// migrationLock is a DBMS_LOCK user lock named after
// the migrations table, requested exclusive with release_on_commit FALSE:
// Oracle commits at every DDL statement, so a lock released by commit would
// be gone after the first CREATE. The lock is held by the session until
// migrationUnlock. The user needs EXECUTE ON SYS.DBMS_LOCK (granted by a
// DBA). ALLOCATE_UNIQUE commits, which is harmless as the first statement.
func (d *Dialect) migrationLock() []dialects.Query {
	return []dialects.Query{{SQL: `DECLARE
  h VARCHAR2(128);
  r INTEGER;
BEGIN
  DBMS_LOCK.ALLOCATE_UNIQUE('` + d.lockName + `', h);
  r := DBMS_LOCK.REQUEST(h, DBMS_LOCK.X_MODE, ` + strconv.Itoa(oracleLockTimeout) + `, FALSE);
  IF r NOT IN (0, 4) THEN
    RAISE_APPLICATION_ERROR(-20001, 'oncebox: DBMS_LOCK.REQUEST returned ' || r);
  END IF;
END;`}}
}

// schemaCreate is nothing. An Oracle schema is a user, and creating users
// needs DBA rights: the configured schema must exist.
func (d *Dialect) schemaCreate() []dialects.Query { return nil }

// migrationUnlock releases the DBMS_LOCK lock (result 4, not held, is
// ignored).
func (d *Dialect) migrationUnlock() []dialects.Query {
	return []dialects.Query{{SQL: `DECLARE
  h VARCHAR2(128);
  r INTEGER;
BEGIN
  DBMS_LOCK.ALLOCATE_UNIQUE('` + d.lockName + `', h);
  r := DBMS_LOCK.RELEASE(h);
  IF r NOT IN (0, 4) THEN
    RAISE_APPLICATION_ERROR(-20001, 'oncebox: DBMS_LOCK.RELEASE returned ' || r);
  END IF;
END;`}}
}

// migrationsTableCreate creates the table of applied migration versions,
// ignoring ORA-00955 when it exists (no IF NOT EXISTS before 23c).
func (d *Dialect) migrationsTableCreate() dialects.Query {
	return dialects.Query{SQL: `BEGIN
  EXECUTE IMMEDIATE q'[CREATE TABLE ` + d.tables.Migrations + ` (
    version    NUMBER(10)         PRIMARY KEY,
    name       VARCHAR2(255 CHAR) NOT NULL,
    applied_at TIMESTAMP(6)       NOT NULL
  )]';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE <> -955 THEN RAISE; END IF;
END;`}
}

// migrationsSelect selects the applied versions, one integer per row.
func (d *Dialect) migrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// migrationsInsert records version as applied at the given time.
func (d *Dialect) migrationsInsert(version int, name string, at time.Time) dialects.Query {
	var b binder
	return b.Query("INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES (" +
		b.P(version) + ", " + b.P(name) + ", " + b.T(at) + ")")
}

// errNoTestSchema is the error of a test schema on Oracle.
var errNoTestSchema = fmt.Errorf("%w: oracle: a schema is a user, which oncebox does not create: "+
	"give a test's tables a prefix of their own (TablesConfig.Prefix) instead", errors.ErrUnsupported)

// testSchema stands for the statements of a test schema, which Oracle has
// not: creating a user needs DBA rights (Database.TestSchema is false).
func (d *Dialect) testSchema() (dialects.Query, error) { return dialects.Query{}, errNoTestSchema }
