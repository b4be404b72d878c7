package middleware_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestConfigsValidateNamingTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  interface{ Validate() error }
		want []string
	}{
		{middleware.InboxConfig{HandlerNamespaces: map[string]string{"": "a"}}, []string{"InboxConfig.Dialect is nil",
			"InboxConfig.HandlerNamespaces has an empty handler name"}},
		{middleware.PoisonConfig{}, []string{"PoisonConfig.Dialect is nil"}},
		{middleware.InboxCleanerConfig{Lease: -1}, []string{"InboxCleanerConfig.Dialect is nil", "InboxCleanerConfig.Lease must be > 0"}},
	} {
		err := c.cfg.Validate()
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
		for _, w := range c.want {
			require.ErrorContains(t, err, w)
		}
	}
}
