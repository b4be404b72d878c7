package poller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
)

// MaxDiscoveredTypes comes from outbox.max-discovered-types unless the Go
// field sets it.
func TestMaxDiscoveredTypesFromTheOutboxConfig(t *testing.T) {
	t.Parallel()
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	c, _, err := withDefaultsChecked(Config{Dialect: pg})
	require.NoError(t, err)
	require.Equal(t, oncebox.DefaultMaxDiscoveredTypes, c.MaxDiscoveredTypes)
	yaml := oncebox.Config{Outbox: oncebox.OutboxConfig{MaxDiscoveredTypes: 7}}
	c, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: yaml})
	require.NoError(t, err)
	require.Equal(t, 7, c.MaxDiscoveredTypes)
	c, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: yaml, MaxDiscoveredTypes: 3})
	require.NoError(t, err)
	require.Equal(t, 3, c.MaxDiscoveredTypes, "the Go field wins")
	_, _, err = withDefaultsChecked(Config{Dialect: pg, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{MaxDiscoveredTypes: 1000}}})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "outbox.max-discovered-types: must be between 1 and 999, got 1000")
}
