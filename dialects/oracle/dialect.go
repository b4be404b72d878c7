package oracle

import (
	"embed"
	"strconv"
	"strings"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

// migrationsFS holds the numbered migration scripts of this database.
//
//go:embed migrations
var migrationsFS embed.FS

// oracleMaxInList is Oracle's limit on the values of one IN (…) list
// (ORA-01795).
const oracleMaxInList = 1000

// oracleMaxBindParams is the most bind parameters the dialect puts in one
// statement (Oracle's own limit is 65,535 per statement).
const oracleMaxBindParams = 65535

// oracleEmpty stands for the empty string in the columns where "" is a
// meaningful value (handler_name, the inbox's consumer and event_id): Oracle
// stores "" as NULL, which a NOT NULL or primary-key column refuses and
// which compares equal to nothing.
const oracleEmpty = " "

// Oracle is the dialect of Oracle Database 19c and later, through the go-ora
// driver (github.com/sijms/go-ora/v2, "oracle"). Identifiers longer than 30
// bytes (a long table prefix) need 12.2 or later. It was written against the
// documentation and has not been run against a server in this repository's
// CI unless ORACLE_DSN is set: see docs/oracle.md.
type Dialect struct {
	tables   dialects.Tables
	schema   string
	lockName string
}

var _ dialects.Dialect = (*Dialect)(nil)

// NewOracle returns the Oracle dialect for the tables placed by cfg. The
// schema is an Oracle user, which must exist: the dialect never creates it.
func New(cfg oncebox.TablesConfig) (*Dialect, error) {
	t, err := dialects.NewTables(cfg)
	if err != nil {
		return nil, err
	}
	return &Dialect{tables: t, schema: cfg.Schema, lockName: oracleLockName(t.Migrations)}, nil
}

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

// Name implements Dialect.
func (d *Dialect) Name() string { return "oracle" }

// Tables implements Dialect.
func (d *Dialect) Tables() dialects.Tables { return d.tables }

// Features implements Dialect.
func (d *Dialect) Features() dialects.Features {
	return dialects.Features{
		Placeholder:     dialects.PlaceholderColon,
		Returning:       false,
		SkipLocked:      dialects.SkipLockedRowidCursor,
		IDType:          "RAW(16)",
		InsertIgnore:    dialects.InsertMerge,
		MaxInList:       oracleMaxInList,
		MaxBindParams:   oracleMaxBindParams,
		ReadCommittedTx: oracleTx.Options,
	}
}

// EncodeID implements Dialect: the 16 bytes, which go-ora binds as RAW. A
// UUIDv7's bytes sort in time order.
func (d *Dialect) EncodeID(id oncebox.EventID) any {
	b := make([]byte, 16)
	copy(b, id[:])
	return b
}

// oraText returns s, or oracleEmpty for "".
func oraText(s string) string {
	if s == "" {
		return oracleEmpty
	}
	return s
}

// oraTime is a time argument: always UTC, bound with SYS_EXTRACT_UTC in the
// SQL (go-ora binds a time.Time as TIMESTAMP WITH TIME ZONE; the columns are
// TIMESTAMP(6) holding UTC, so every comparison and assignment goes through
// SYS_EXTRACT_UTC and never depends on the session time zone).
func oraTime(t time.Time) time.Time { return t.UTC() }

// binder numbers bind parameters :1, :2, … in the order they are written.
// Oracle binds by position for SQL statements: a placeholder written twice
// takes two arguments, so no placeholder is ever reused; a value needed
// twice is bound twice.
type binder = sqlkit.Binder[style]

// style is Oracle's way of binding: :n placeholders, a time bound as UTC
// and read through SYS_EXTRACT_UTC, at most 1,000 values in one IN list.
type style struct{}

func (style) Placeholder(n int) string { return ":" + strconv.Itoa(n) }

func (style) Time(v time.Time, bind func(any) string) string {
	return "SYS_EXTRACT_UTC(" + bind(oraTime(v)) + ")"
}

func (style) MaxInList() int { return oracleMaxInList }

// idIn is b.In over event ids.
func idIn(b *binder, col string, ids []oncebox.EventID, d *Dialect) string {
	vals := make([]any, len(ids))
	for i, id := range ids {
		vals[i] = d.EncodeID(id)
	}
	return b.In(col, vals)
}

// Migrations implements Dialect. The script is split at lines holding only
// "/" (splitOracleScript), not by splitStatements: each statement is a
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

// MigrationLock implements Dialect with a DBMS_LOCK user lock named after
// the migrations table, requested exclusive with release_on_commit FALSE:
// Oracle commits at every DDL statement, so a lock released by commit would
// be gone after the first CREATE. The lock is held by the session until
// MigrationUnlock. The user needs EXECUTE ON SYS.DBMS_LOCK (granted by a
// DBA). ALLOCATE_UNIQUE commits, which is harmless as the first statement.
func (d *Dialect) MigrationLock() []dialects.Query {
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

// SchemaCreate implements Dialect: nothing. An Oracle schema is a user, and
// creating users needs DBA rights: the configured schema must exist.
func (d *Dialect) SchemaCreate() []dialects.Query { return nil }

// MigrationUnlock implements Dialect: release the DBMS_LOCK lock (result 4,
// not held, is ignored).
func (d *Dialect) MigrationUnlock() []dialects.Query {
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

// MigrationsTableCreate implements Dialect: CREATE TABLE, ignoring
// ORA-00955 when it exists (no IF NOT EXISTS before 23c).
func (d *Dialect) MigrationsTableCreate() dialects.Query {
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

// MigrationsSelect implements Dialect.
func (d *Dialect) MigrationsSelect() dialects.Query {
	return dialects.Query{SQL: "SELECT version FROM " + d.tables.Migrations + " ORDER BY version"}
}

// MigrationsInsert implements Dialect.
func (d *Dialect) MigrationsInsert(version int, name string, at time.Time) dialects.Query {
	var b binder
	return b.Query("INSERT INTO " + d.tables.Migrations + " (version, name, applied_at) VALUES (" +
		b.P(version) + ", " + b.P(name) + ", " + b.T(at) + ")")
}

// oracleInsertParams is the number of bind parameters per row of
// EventsInsert: eight, and the creation time three times (no placeholder is
// reused on Oracle).
const oracleInsertParams = sqlkit.EventInsertParams + 2

// oracleMaxInsertAllColumns is Oracle's limit on the target columns of all
// the INTO clauses of one multitable insert together (ORA-24335 beyond).
const oracleMaxInsertAllColumns = 999

// oracleInsertColumns is the number of columns of one EventsInsert row.
const oracleInsertColumns = 12

// MaxRowsPerInsert implements Dialect: 83 rows, bounded by the 999 target
// columns of an INSERT ALL (12 per row) well before the 65,535 binds (10
// per row).
func (d *Dialect) MaxRowsPerInsert() int {
	return min(oracleMaxBindParams/oracleInsertParams, oracleMaxInsertAllColumns/oracleInsertColumns)
}

// EventsInsert implements Dialect: one row is a plain INSERT … VALUES;
// several rows are one INSERT ALL INTO … VALUES (…) … SELECT 1 FROM DUAL.
// An empty payload is stored as NULL (Oracle has no empty BLOB bind) and read
// back as empty.
func (d *Dialect) EventsInsert(rows []dialects.EventRow) dialects.Query {
	var b binder
	var s strings.Builder
	values := func(r dialects.EventRow) string {
		key := sqlkit.Nullable(r.Key)
		return "(" + b.P(d.EncodeID(r.ID)) + ", " + b.P(r.EventType) + ", " + b.P(r.Topic) + ", " +
			b.P(key) + ", " + b.P(r.MessageUUID) + ", " + b.P(sqlkit.NonNilBytes(r.Payload)) + ", " +
			b.P(r.Metadata) + ", 'PENDING', 0, " + b.T(r.CreatedAt) + ", " + b.T(r.CreatedAt) + ", " +
			b.T(r.CreatedAt) + ")"
	}
	if len(rows) == 1 {
		s.WriteString("INSERT INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\nVALUES " + values(rows[0]))
		return b.Query(s.String())
	}
	s.WriteString("INSERT ALL")
	for _, r := range rows {
		s.WriteString("\n  INTO " + d.tables.Events + " (" + sqlkit.EventInsertColumns + ")\n    VALUES " + values(r))
	}
	s.WriteString("\nSELECT 1 FROM DUAL")
	return b.Query(s.String())
}

// Backlog implements Dialect: the shared UNION ALL of two GROUP BYs, each
// with its FROM; a NULL of TIMESTAMP(6) for the DLQ's oldest.
func (d *Dialect) Backlog() dialects.Query {
	return dialects.Query{SQL: sqlkit.BacklogSQL(d.tables, "CAST(NULL AS TIMESTAMP(6))")}
}

// Notify implements Dialect: Oracle's notifications (DBMS_ALERT, AQ) need
// grants and objects the schema does not have, so the relay polls only.
func (d *Dialect) Notify(string, string) dialects.Query { return dialects.Query{} }

// Database is Oracle as the registry lists it.
var Database = dialects.Database{
	Name:           "oracle",
	New:            func(cfg oncebox.TablesConfig) (dialects.Dialect, error) { return New(cfg) },
	DriverPackages: []string{"sijms/go-ora", "godror"},
	URLSchemes:     []string{"oracle"},
	IsTransient:    IsTransient,
}
