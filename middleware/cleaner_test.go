package middleware_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestInboxCleanUpDeletesOldIDsOnOneInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	// 25 ids processed 25 hours ago, 5 an hour ago.
	for i := range 30 {
		at := now.Add(-time.Hour)
		if i < 25 {
			at = now.Add(-25 * time.Hour)
		}
		q := b.schema.Dialect.InboxInsert("", fmt.Sprintf("id-%d", i), at)
		_, err := b.schema.Pool.Exec(ctx, q.SQL, q.Args...)
		require.NoError(t, err)
	}

	clock := clockwork.NewFakeClockAt(now)
	var mu sync.Mutex
	var results []middleware.JobResult
	for _, name := range []string{"A", "B"} {
		c, err := middleware.NewInboxCleaner(b.schema.Beginner, nil, middleware.InboxCleanerConfig{
			Dialect: b.schema.Dialect, InstanceID: name, Clock: clock,
			CleanUp: oncebox.CleanUpConfig{BatchSize: 10}, // several statements
			OnRun: func(r middleware.JobResult) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			},
		})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		<-c.Running()
		t.Cleanup(func() { require.NoError(t, c.Close()); require.NoError(t, <-errc) })
	}
	require.NoError(t, clock.BlockUntilContext(ctx, 2))
	clock.Advance(5 * time.Minute) // both run at once
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(results) == 2 }, 10*time.Second, time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	ran, skipped := 0, 0
	for _, r := range results {
		require.NoError(t, r.Err)
		if r.Skipped {
			skipped++
		} else {
			ran++
			require.Equal(t, 25, r.Rows)
		}
	}
	require.Equal(t, 1, ran)
	require.Equal(t, 1, skipped)
	require.Equal(t, 5, b.schema.Count(t, b.schema.Dialect.Tables().Inbox, ""))
}

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
