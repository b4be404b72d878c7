package sqlkit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// MigratorStatements are a database's builders of the statements that apply
// its migrations and make the schemas of tests.
type MigratorStatements struct {
	// Lock takes the lock serialising concurrent migrations; the
	// statements run first in the migration transaction.
	Lock func() []dialects.Query
	// Unlock releases that lock; none when the commit releases it.
	Unlock func() []dialects.Query
	// SchemaCreate creates the configured schema when it is missing; none
	// without a schema, or where the dialect never creates one.
	SchemaCreate func() []dialects.Query
	// TableCreate creates, if missing, the table of applied migration
	// versions.
	TableCreate func() dialects.Query
	// Applied selects the applied versions, one integer per row.
	Applied func() dialects.Query
	// Record records version as applied at the given time.
	Record func(version int, name string, at time.Time) dialects.Query
	// TestSchemaCreate creates the configured schema with the server's
	// defaults, failing if it exists; an error where the database cannot
	// give a test a schema of its own.
	TestSchemaCreate func() (dialects.Query, error)
	// TestSchemaDrop drops the configured schema and all it holds, if it
	// exists.
	TestSchemaDrop func() (dialects.Query, error)
}

// ErrNoTestSchema is the error of a test schema asked of a dialect with no
// configured schema: it would name the connection's own.
var ErrNoTestSchema = fmt.Errorf("%w: dialects: a test schema needs a configured schema (TablesConfig.Schema)", oncebox.ErrInvalidInput)

// ScriptForm is how a database's client reads a script of statements.
type ScriptForm struct {
	// Database names the database in a script's heading.
	Database string
	// End ends a statement.
	End string
	// Now is the database's current time in UTC as the migrations table's
	// applied_at column takes it, where the recording statement binds a
	// time (inside the SQL the database wraps it in, if any).
	Now string
}

// Migrator runs the migration statements built by S: it implements the
// steps of dialects.Migrator for every database that embeds it.
type Migrator struct {
	S MigratorStatements
	// Script is how MigrationScript writes the statements out.
	Script ScriptForm
}

// LockMigrations implements dialects.Migrator.
func (r Migrator) LockMigrations(ctx context.Context, tx wsql.ContextExecutor) error {
	return execAll(ctx, tx, r.S.Lock())
}

// EnsureMigrationsTable implements dialects.Migrator.
func (r Migrator) EnsureMigrationsTable(ctx context.Context, tx wsql.ContextExecutor) error {
	return execAll(ctx, tx, r.bootstrap())
}

// bootstrap returns the statements that create the configured schema (when
// the dialect creates one) and the migrations table, each only when
// missing.
func (r Migrator) bootstrap() []dialects.Query {
	return append(r.S.SchemaCreate(), r.S.TableCreate())
}

// AppliedMigrations implements dialects.Migrator.
func (r Migrator) AppliedMigrations(ctx context.Context, db wsql.ContextExecutor) ([]int, error) {
	q := r.S.Applied()
	rows, err := db.QueryContext(ctx, q.SQL, q.Args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, RowsErr(rows)
}

// ApplyMigration implements dialects.Migrator.
func (r Migrator) ApplyMigration(ctx context.Context, tx wsql.ContextExecutor, m dialects.Migration, at time.Time) error {
	for i, stmt := range m.Statements {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%s statement %d: %w", m.Name, i+1, err)
		}
	}
	if err := execAll(ctx, tx, []dialects.Query{r.S.Record(m.Version, m.Name, at)}); err != nil {
		return fmt.Errorf("record %s: %w", m.Name, err)
	}
	return nil
}

// UnlockMigrations implements dialects.Migrator.
func (r Migrator) UnlockMigrations(ctx context.Context, tx wsql.ContextExecutor) error {
	return execAll(ctx, tx, r.S.Unlock())
}

// MigrationScript implements dialects.Migrator.
func (r Migrator) MigrationScript(m dialects.Migration) (dialects.MigrationScript, error) {
	s := dialects.MigrationScript{Database: r.Script.Database, End: r.Script.End}
	for _, q := range r.bootstrap() {
		s.Statements = append(s.Statements, q.SQL)
	}
	s.Statements = append(s.Statements, m.Statements...)
	// The time is the database's own: the zero time stands for it.
	rec, err := inline(r.S.Record(m.Version, m.Name, time.Time{}), r.Script.Now)
	if err != nil {
		return dialects.MigrationScript{}, err
	}
	s.Statements = append(s.Statements, rec)
	return s, nil
}

// CreateTestSchema implements dialects.Migrator.
func (r Migrator) CreateTestSchema(ctx context.Context, db wsql.ContextExecutor) error {
	q, err := r.S.TestSchemaCreate()
	if err != nil {
		return err
	}
	return execAll(ctx, db, []dialects.Query{q})
}

// DropTestSchema implements dialects.Migrator.
func (r Migrator) DropTestSchema(ctx context.Context, db wsql.ContextExecutor) error {
	q, err := r.S.TestSchemaDrop()
	if err != nil {
		return err
	}
	return execAll(ctx, db, []dialects.Query{q})
}

// execAll runs qs in order and stops at the first error.
func execAll(ctx context.Context, db wsql.ContextExecutor, qs []dialects.Query) error {
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q.SQL, q.Args...); err != nil {
			return err
		}
	}
	return nil
}

// inline returns q's SQL with each bind parameter ($n, :n or ?) replaced
// by its value as a literal: an integer, a quoted string, or, for a time,
// now (the database's current time). It serves the INSERT that records a
// migration, whose SQL holds no quoted text where a placeholder could
// hide.
func inline(q dialects.Query, now string) (string, error) {
	var b strings.Builder
	next := 0
	s := q.SQL
	for i := 0; i < len(s); i++ {
		c := s[i]
		numbered := (c == '$' || c == ':') && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9'
		if c != '?' && !numbered {
			b.WriteByte(c)
			continue
		}
		n := next
		next++
		if numbered {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, _ = strconv.Atoi(s[i+1 : j])
			n--
			i = j - 1
		}
		if n < 0 || n >= len(q.Args) {
			return "", fmt.Errorf("migrate: statement %q: parameter %d has no value", s, n+1)
		}
		switch v := q.Args[n].(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			if strings.ContainsAny(v, `'\`) {
				return "", fmt.Errorf("migrate: statement %q: the value %q cannot be written as a literal", s, v)
			}
			b.WriteString("'" + v + "'")
		case time.Time:
			b.WriteString(now)
		default:
			return "", fmt.Errorf("migrate: statement %q: a value of type %T cannot be written as a literal", s, v)
		}
	}
	return b.String(), nil
}
