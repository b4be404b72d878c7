package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncebox/watermill-oncebox/internal/lease"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestOneOwnerAtATimeWithAtLeastAndAtMost(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	ctx := context.Background()
	lockers := make([]*lease.Locker, 8)
	for i := range lockers {
		lockers[i] = lease.NewLocker(s.Beginner, s.Dialect, fmt.Sprintf("owner-%d", i), clock)
	}

	// Eight instances race for the lease: exactly one gets it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := []int{}
	for i, l := range lockers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := l.TryAcquire(ctx, "job", 10*time.Minute)
			require.NoError(t, err)
			if ok {
				mu.Lock()
				winners = append(winners, i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, winners, 1)
	w := lockers[winners[0]]
	other := lockers[(winners[0]+1)%len(lockers)]

	// The lease is per job name.
	_, ok, err := other.TryAcquire(ctx, "another-job", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	// Released after 10s with at-least 1m: kept until one minute after it was taken.
	_, ok, err = w.TryAcquire(ctx, "job", 10*time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "not even its owner takes a live lease twice")
	clock.Advance(10 * time.Second)
	held := currentLease(t, s, "job")
	require.NoError(t, w.Release(ctx, held, time.Minute))
	_, ok, err = other.TryAcquire(ctx, "job", 10*time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "at-least keeps it 1m")
	clock.Advance(50 * time.Second)
	le2, ok, err := other.TryAcquire(ctx, "job", 10*time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "free after at-least")

	// A crashed owner never releases: the lease ends at at-most.
	clock.Advance(9*time.Minute + 59*time.Second)
	_, ok, err = w.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	clock.Advance(time.Second)
	_, ok, err = w.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "free after at-most")

	// The late release of the crashed owner's lease does not touch the new one.
	require.NoError(t, other.Release(ctx, le2, 0))
	_, ok, err = other.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
}

// currentLease reads the current lease of job from the table.
func currentLease(t *testing.T, s *pgtest.Schema, job string) lease.Held {
	t.Helper()
	var h lease.Held
	require.NoError(t, s.Pool.QueryRow(context.Background(),
		"SELECT name, locked_by, locked_at, lock_until FROM "+s.Dialect.Tables().Jobs+" WHERE name = $1", job).
		Scan(&h.Name, &h.Owner, &h.LockedAt, &h.Until))
	return h
}
