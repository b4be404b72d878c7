package dialecttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/lease"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Two pollers: the outbox clean-up deletes the PROCESSED rows older than the
// ttl on one of them, under the lease, in several statements.
func testOutboxCleanUpRunsOnOneInstanceUnderTheLease(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 30)
	pending := s.publish(t, s.clock, "order-created", 1)
	// 20 rows processed 25 hours ago, 10 an hour ago, one still PENDING.
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED', updated_at = "+s.P(1)+" WHERE id <> "+s.P(2),
		t0.Add(-time.Hour), s.ID(pending[0]))
	s.exec(t, "UPDATE "+s.Tables.Events+" SET updated_at = "+s.P(1)+", created_at = "+s.P(2)+" WHERE id = "+s.P(3),
		t0.Add(-25*time.Hour), t0.Add(-25*time.Hour), s.ID(pending[0]))
	in, args := s.inList(2, ids[:20])
	s.exec(t, "UPDATE "+s.Tables.Events+" SET updated_at = "+s.P(1)+" WHERE id IN ("+in+")", append([]any{t0.Add(-25 * time.Hour)}, args...)...)

	hs := []*hooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		cfg := s.pollerConfig("other-type")
		cfg.InstanceID, cfg.Hooks = name, hs[i]
		cfg.Oncebox.Outbox.CleanUp.BatchSize = 7 // several delete statements
		s.startPoller(t, nil, newRecorder(), cfg)
	}
	stepUntil(t, s.clock, 2*waitersPerPoller, time.Second, 5*time.Minute, func() bool {
		ran, skipped, _ := runs(t, poller.JobOutboxCleanUp, hs...)
		return ran+skipped >= 2
	})
	ran, skipped, rows := runs(t, poller.JobOutboxCleanUp, hs...)
	require.Equal(t, 1, ran, "one instance ran the clean-up")
	require.Equal(t, 1, skipped, "the other found the lease taken")
	require.Equal(t, 20, rows)
	require.Equal(t, 10, s.status(t, "PROCESSED"), "rows younger than the ttl stay")
	require.Equal(t, 1, s.status(t, "PENDING"), "an old PENDING row is never deleted")
}

// Two pollers: RESOLVED DLQ rows resolved longer than the ttl ago are
// deleted on one of them; MOVED rows and recent resolutions stay.
func testDLQCleanUpRunsOnOneInstanceUnderTheLease(t *testing.T, tg Target) {
	s := setup(t, tg)
	st := s.store(t)
	ctx := context.Background()
	var old []oncebox.EventID
	for range 5 {
		old = append(old, s.insertDLQ(t, dlqRow{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-3 * time.Hour)}))
	}
	young := s.insertDLQ(t, dlqRow{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-30 * time.Minute)})
	oldMoved := s.insertDLQ(t, dlqRow{status: oncebox.DLQStatusMoved, movedAt: t0.Add(-3 * time.Hour)})
	// Moved long ago but resolved recently: the ttl counts from the resolution.
	late := s.insertDLQ(t, dlqRow{status: oncebox.DLQStatusResolved, movedAt: t0.Add(-3 * time.Hour)})
	s.exec(t, "UPDATE "+s.Tables.DLQ+" SET updated_at = "+s.P(1)+" WHERE id = "+s.P(2), t0.Add(-10*time.Minute), s.ID(late))

	hs := []*hooks{{}, {}}
	for i, name := range []string{"A", "B"} {
		cfg := s.pollerConfig("order-created")
		cfg.InstanceID, cfg.Hooks = name, hs[i]
		cfg.Oncebox.Outbox.DLQ.Enabled = true
		cfg.Oncebox.Outbox.DLQ.CleanUp.TTL = time.Hour
		cfg.Oncebox.Outbox.DLQ.CleanUp.BatchSize = 2 // several statements
		s.startPoller(t, nil, newRecorder(), cfg)
	}
	stepUntil(t, s.clock, 2*waitersPerPollerDLQ, time.Second, 10*time.Minute, func() bool {
		ran, skipped, _ := runs(t, poller.JobDLQCleanUp, hs...)
		return ran+skipped >= 2
	})
	ran, skipped, rows := runs(t, poller.JobDLQCleanUp, hs...)
	require.Equal(t, 1, ran, "one instance ran the clean-up")
	require.Equal(t, 1, skipped, "the other found the lease taken")
	require.Equal(t, 5, rows)
	for _, id := range old {
		_, err := st.Get(ctx, id)
		require.ErrorIs(t, err, dlq.ErrNotFound)
	}
	for _, id := range []oncebox.EventID{young, oldMoved, late} {
		_, err := st.Get(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, 1, s.Count(t, s.Tables.Jobs, "name = "+s.P(1), poller.JobDLQCleanUp))
}

// Two inbox cleaners started together: one deletes the old ids.
func testInboxCleanUpRunsOnOneInstanceUnderTheLease(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	// 25 ids processed 25 hours ago, 5 an hour ago.
	for i := range 30 {
		at := t0.Add(-time.Hour)
		if i < 25 {
			at = t0.Add(-25 * time.Hour)
		}
		_, err := s.Dialect.InboxRecord(ctx, s.Beginner, "", fmt.Sprintf("id-%d", i), at)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var results []middleware.JobResult
	for _, name := range []string{"A", "B"} {
		c, err := middleware.NewInboxCleaner(s.Beginner, middleware.InboxCleanerConfig{
			Dialect: s.Dialect, InstanceID: name, Clock: s.clock,
			CleanUp: oncebox.CleanUpConfig{BatchSize: 10}, // several statements
			OnRun: func(r middleware.JobResult) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			},
		}, nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(ctx) }()
		<-c.Running()
		t.Cleanup(func() { require.NoError(t, c.Close()); require.NoError(t, <-errc) })
	}
	require.NoError(t, s.clock.BlockUntilContext(ctx, 2))
	s.clock.Advance(5 * time.Minute) // both run at once
	eventually(t, "both ran", func() bool { mu.Lock(); defer mu.Unlock(); return len(results) == 2 })
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
	require.Equal(t, 5, s.Count(t, s.Tables.Inbox, ""))
}

// The lease: one holder among racers, per job name, kept at-least after a
// release, ended at at-most when its owner crashed, and a late release of an
// ended lease does not touch the next one.
func testLease(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	lockers := make([]*lease.Locker, 8)
	for i := range lockers {
		lockers[i] = lease.NewLocker(s.Beginner, s.Dialect, fmt.Sprintf("owner-%d", i), clock)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := map[int]lease.Held{}
	for i, l := range lockers {
		wg.Go(func() {
			le, ok, err := l.TryAcquire(ctx, "job", 10*time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				winners[i] = le
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, winners, 1, "one of eight racers holds the lease")
	var wi int
	var held lease.Held
	for i, le := range winners {
		wi, held = i, le
	}
	w, other := lockers[wi], lockers[(wi+1)%len(lockers)]

	_, ok, err := other.TryAcquire(ctx, "another-job", time.Minute)
	require.NoError(t, err)
	require.True(t, ok, "the lease is per job name")

	_, ok, err = w.TryAcquire(ctx, "job", 10*time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "not even its owner takes a live lease twice")
	clock.Advance(10 * time.Second)
	require.NoError(t, w.Release(ctx, held, time.Minute))
	_, ok, err = other.TryAcquire(ctx, "job", 10*time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "at-least keeps it one minute after it was taken")
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
	require.Equal(t, 2, s.Count(t, s.Tables.Jobs, ""))
}
