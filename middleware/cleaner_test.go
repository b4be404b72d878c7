package middleware_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestNewInboxCleanerValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := middleware.NewInboxCleaner(nil, nil, middleware.InboxCleanerConfig{})
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "db is nil")
	_, err = middleware.NewInboxCleaner(b.schema.Beginner, nil, middleware.InboxCleanerConfig{Dialect: b.schema.Dialect,
		CleanUp: oncebox.CleanUpConfig{TTL: -time.Hour}})
	require.ErrorContains(t, err, "inbox.clean-up.ttl must be > 0")
}
