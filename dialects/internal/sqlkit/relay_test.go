package sqlkit_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// TestEveryDatabaseSetsEveryRelayBuilder: each database's Dialect embeds a
// sqlkit.Relay whose builders and Single are all set. A nil one would
// panic in a user's relay, the first time it runs that statement.
func TestEveryDatabaseSetsEveryRelayBuilder(t *testing.T) {
	t.Parallel()
	for _, db := range registry.All() {
		d, err := db.New(oncebox.TablesConfig{})
		require.NoError(t, err)
		r, ok := embedded[sqlkit.Relay](d)
		require.True(t, ok, "%s: the Dialect embeds a sqlkit.Relay", db.Name)
		require.Empty(t, sqlkit.NilFuncs(r), "%s: unset in its sqlkit.Relay", db.Name)
	}
}

// TestNilFuncsFindsAnUnsetBuilder checks the check.
func TestNilFuncsFindsAnUnsetBuilder(t *testing.T) {
	t.Parallel()
	r := sqlkit.Relay{Single: sqlkit.Autocommit}
	require.Contains(t, sqlkit.NilFuncs(r), "S.DueTypes")
	require.Contains(t, sqlkit.NilFuncs(&r), "S.InstancesDeleteBefore")
	require.NotContains(t, sqlkit.NilFuncs(r), "Single")
	require.Len(t, sqlkit.NilFuncs(r), reflect.TypeFor[sqlkit.RelayStatements]().NumField())
	require.Equal(t, []string{"Single"}, sqlkit.NilFuncs(sqlkit.Relay{S: fullStatements(t)}))
}

// embedded returns the field of type T that the struct d points to embeds.
func embedded[T any](d any) (T, bool) {
	var zero T
	v := reflect.ValueOf(d)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return zero, false
	}
	v = v.Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Anonymous && f.Type == reflect.TypeFor[T]() {
			return v.Field(i).Interface().(T), true
		}
	}
	return zero, false
}

// fullStatements is the PostgreSQL dialect's builders, every one set.
func fullStatements(t *testing.T) sqlkit.RelayStatements {
	t.Helper()
	d, err := registry.New("postgres", oncebox.TablesConfig{})
	require.NoError(t, err)
	r, ok := embedded[sqlkit.Relay](d)
	require.True(t, ok)
	return r.S
}
