package dialects_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
)

// The channel is a plain identifier of at most 63 bytes, distinct for
// tables that differ by schema or prefix, and the same for names that
// PostgreSQL folds to the same tables.
func TestNotifyChannelNamesTheTables(t *testing.T) {
	t.Parallel()
	channel := func(schema, prefix string) string {
		tables, err := dialects.NewTables(oncebox.TablesConfig{Schema: schema, Prefix: prefix})
		require.NoError(t, err)
		return dialects.NotifyChannel(tables)
	}
	ident := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	long := strings.Repeat("s", 63)
	seen := map[string]string{}
	for _, c := range [][2]string{{"", ""}, {"shop", ""}, {"billing", ""}, {"shop", "b_"}, {"", "shop_"}, {long, strings.Repeat("p", 40)}, {long, strings.Repeat("p", 39)}} {
		ch := channel(c[0], c[1])
		require.LessOrEqual(t, len(ch), 63, ch)
		require.Regexp(t, ident, ch)
		require.NotContains(t, seen, ch, "%v and %s share a channel", c, seen[ch])
		seen[ch] = c[0] + "." + c[1]
	}
	require.Equal(t, channel("shop", ""), channel("Shop", ""), "unquoted names fold to lower case")
	require.Equal(t, "oncebox_shop_outbox_events_", channel("shop", "")[:27])
}

// Only PostgreSQL can wake the relay on commit.
func TestNotifyIsPostgreSQLOnly(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"postgres", "mysql", "oracle"} {
		d, err := registry.New(name, oncebox.TablesConfig{})
		require.NoError(t, err)
		q := d.Notify("ch", "order-created")
		if name == "postgres" {
			require.Equal(t, dialects.Query{SQL: "SELECT pg_notify($1, $2)", Args: []any{"ch", "order-created"}}, q)
		} else {
			require.Empty(t, q.SQL, name)
		}
	}
}
