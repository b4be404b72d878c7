package oncebox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// ordering and on-failure load from YAML, inherit from the defaults block
// and default to none and skip; a wrong value, or block on an unordered
// type, is an error naming the field and the value.
func TestConfigOrdering(t *testing.T) {
	t.Parallel()
	cfg, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  outbox:
    defaults:
      ordering: key
    events:
      orders: {on-failure: block}
      audit: {ordering: none}
`))
	require.NoError(t, err)
	orders, err := cfg.Event("orders")
	require.NoError(t, err)
	require.True(t, orders.Ordered())
	require.Equal(t, oncebox.OnFailureBlock, orders.OnFailure)
	audit, err := cfg.Event("audit")
	require.NoError(t, err)
	require.False(t, audit.Ordered())
	discovered, err := cfg.Event("anything")
	require.NoError(t, err)
	require.True(t, discovered.Ordered(), "a type nobody configured takes the defaults block")
	require.Equal(t, oncebox.OnFailureSkip, discovered.OnFailure)

	plain, err := oncebox.Config{}.WithDefaults().Event("x")
	require.NoError(t, err)
	require.Equal(t, oncebox.OrderingNone, plain.Ordering, "unordered by default")
	require.Equal(t, oncebox.OnFailureSkip, plain.OnFailure)

	for yaml, want := range map[string]string{
		`{defaults: {ordering: keys}}`:                                                  `outbox.defaults.ordering: must be "key" or "none", got "keys"`,
		`{events: {a: {on-failure: drop}}}`:                                             `outbox.events.a.on-failure: must be "skip" or "block", got "drop"`,
		`{events: {a: {on-failure: block}}}`:                                            `outbox.events.a.on-failure: "block" needs ordering: "key" (ordering is "none")`,
		`{defaults: {on-failure: block}}`:                                               `outbox.defaults.on-failure: "block" needs ordering: "key" (ordering is "none")`,
		`{defaults: {ordering: key, on-failure: block}, events: {a: {ordering: none}}}`: `outbox.events.a.on-failure: "block" needs ordering: "key" (ordering is "none")`,
	} {
		_, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  outbox: " + yaml + "\n"))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, yaml)
		require.ErrorContains(t, err, want, yaml)
	}
}
