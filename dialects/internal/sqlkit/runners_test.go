package sqlkit_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// TestEveryRunnerHasEveryBuilder builds each registered database's dialect
// and checks every sqlkit runner it embeds: each function field set (a
// builder left out must fail here, not as a nil call at a user's first
// use), and each runner of the roles there. An optional part is a nil
// pointer (Outbox.N where the database cannot notify); where set, it is
// checked too.
func TestEveryRunnerHasEveryBuilder(t *testing.T) {
	t.Parallel()
	want := []reflect.Type{
		reflect.TypeFor[sqlkit.Outbox](), reflect.TypeFor[sqlkit.Inbox](), reflect.TypeFor[sqlkit.Relay](),
		reflect.TypeFor[sqlkit.DLQStore](), reflect.TypeFor[sqlkit.Migrator](), reflect.TypeFor[sqlkit.Inspector](),
	}
	for _, db := range registry.All() {
		d, err := db.New(oncebox.TablesConfig{Schema: "svc"})
		require.NoError(t, err, db.Name)
		v := reflect.ValueOf(d)
		require.Equal(t, reflect.Pointer, v.Kind(), "%s: the dialect is a pointer to a struct", db.Name)
		v = v.Elem()
		var found []reflect.Type
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.Anonymous || f.Type.PkgPath() != reflect.TypeFor[sqlkit.Relay]().PkgPath() {
				continue
			}
			require.Empty(t, nilFuncs(v.Field(i), f.Type.Name()), "%s: unset builders", db.Name)
			if f.Type == reflect.TypeFor[sqlkit.Console]() {
				// Optional: the dialects that class errors in Go embed it
				// (MySQL, SQLite); PostgreSQL has its own statements.
				continue
			}
			found = append(found, f.Type)
			if f.Type == reflect.TypeFor[sqlkit.Outbox]() {
				require.Positive(t, v.Field(i).FieldByName("S").FieldByName("MaxRows").Int(), "%s: Outbox.S.MaxRows", db.Name)
			}
		}
		require.ElementsMatch(t, want, found, "%s: the runners its Dialect embeds", db.Name)
	}
}

// TestNilFuncsFindsAnUnsetBuilder checks the check: a runner with one
// builder left out is reported by its path.
func TestNilFuncsFindsAnUnsetBuilder(t *testing.T) {
	t.Parallel()
	r := sqlkit.Inspector{S: sqlkit.InspectorStatements{}}
	missing := nilFuncs(reflect.ValueOf(r), "Inspector")
	require.NotEmpty(t, missing)
	require.Contains(t, missing, "Inspector.S.Backlog")
	relay := sqlkit.Relay{Single: sqlkit.Autocommit}
	require.Len(t, nilFuncs(reflect.ValueOf(relay), "Relay"), reflect.TypeFor[sqlkit.RelayStatements]().NumField())
}

// nilFuncs returns the paths of the nil function fields of v, looking into
// its struct fields and the structs its non-nil pointers point to.
func nilFuncs(v reflect.Value, path string) []string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil // an optional part the database does not have
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Func:
		if v.IsNil() {
			return []string{path}
		}
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, nilFuncs(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	}
	return nil
}
