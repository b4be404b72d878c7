package poller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
)

// MaxConcurrentQueries is one setting: the YAML's thread-pool-size
// (oncebox.Config.MaxConcurrentQueries) unless the Go field sets it, and
// 2 + n (5 + n with the DLQ) without either, n counting one for discovery.
func TestMaxConcurrentQueriesFromTheOnceboxConfig(t *testing.T) {
	t.Parallel()
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	events := map[string]oncebox.EventSettings{"a": {}, "b": {}}
	c, _, err := withDefaultsChecked(Config{Dialect: pg, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{Events: events}}})
	require.NoError(t, err)
	require.Equal(t, 2+3, c.MaxConcurrentQueries, "two types and discovery")
	c, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{Events: events,
		DLQ: oncebox.DLQConfig{Enabled: true}}}})
	require.NoError(t, err)
	require.Equal(t, 5+3, c.MaxConcurrentQueries, "with the DLQ")
	yaml := oncebox.Config{MaxConcurrentQueries: 7}
	c, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: yaml})
	require.NoError(t, err)
	require.Equal(t, 7, c.MaxConcurrentQueries)
	c, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: yaml, MaxConcurrentQueries: 3})
	require.NoError(t, err)
	require.Equal(t, 3, c.MaxConcurrentQueries, "the Go field wins")
}

// withDefaultsChecked is New's path for a config: its defaults, then its
// checks.
func withDefaultsChecked(c Config) (Config, []oncebox.EventConfig, error) {
	c = c.withDefaults()
	events, err := c.validate()
	return c, events, err
}
