package sqlkit_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// runners are the sqlkit runners whose builders every database must set,
// by the name of the field each database's Dialect embeds them as.
var runners = map[string]reflect.Type{
	"Inbox":  reflect.TypeFor[sqlkit.Inbox](),
	"Outbox": reflect.TypeFor[sqlkit.Outbox](),
}

// TestRunnersHaveEveryBuilder fails when a database leaves a builder of a
// runner nil (the user would get a nil-function panic instead), or a
// statement size at zero. Optional builders are nil pointers to their
// Statements (Outbox.N where the database cannot notify); where set, every
// builder in them is checked too.
func TestRunnersHaveEveryBuilder(t *testing.T) {
	t.Parallel()
	for _, db := range registry.All() {
		d, err := db.New(oncebox.TablesConfig{})
		require.NoError(t, err)
		v := reflect.ValueOf(d).Elem()
		for name, typ := range runners {
			f := v.FieldByName(name)
			require.True(t, f.IsValid(), "%s: Dialect embeds no %s", db.Name, name)
			require.Equal(t, typ, f.Type(), "%s: Dialect.%s", db.Name, name)
			checked := 0
			for i := range f.NumField() {
				s, sname := f.Field(i), db.Name+"."+name+"."+f.Type().Field(i).Name
				if s.Kind() == reflect.Pointer && !s.IsNil() {
					s = s.Elem()
				}
				if s.Kind() == reflect.Struct && strings.HasSuffix(s.Type().Name(), "Statements") {
					requireBuilders(t, sname, s)
					checked++
				}
			}
			require.Positive(t, checked, "%s.%s: no Statements", db.Name, name)
		}
	}
}

// requireBuilders checks that every function field of the Statements v is
// set and every int field positive.
func requireBuilders(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Func:
			require.False(t, f.IsNil(), "%s is nil", name)
		case reflect.Int:
			require.Positive(t, f.Int(), "%s", name)
		}
	}
}
