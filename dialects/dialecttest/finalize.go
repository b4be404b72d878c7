package dialecttest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// isMarkProcessed tells the statements that mark rows PROCESSED, or
// delete them in their place (outbox.finalize: delete: the only DELETE
// guarded by a claim token).
func isMarkProcessed(q string) bool {
	q = strings.TrimSpace(q)
	upper := strings.ToUpper(q)
	return strings.HasPrefix(upper, "UPDATE") && strings.Contains(q, "'PROCESSED'") ||
		strings.HasPrefix(upper, "DELETE") && strings.Contains(q, "claim_token") && strings.Contains(q, "'IN_PROCESS'")
}

// The finalizes of batches whose sends ended while the finalize before ran
// go in one statement (PostgreSQL) or one transaction (MySQL, Oracle). Lost
// with the connection, it loses the finalize of both batches: their rows stay
// IN_PROCESS, are sent again after the recovery, none is lost and no
// attempt is counted. The first PROCESSED update is held until three
// batches (the default MaxBatchesInFlight) have been sent, so the second
// and third wait together; the next PROCESSED statement fails.
func testMergedFinalizeLostWithTheConnection(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 40)
	rec := newRecorder()
	var (
		marks  atomic.Int32
		failed atomic.Value // the statement that failed
	)
	held, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(proceed) }) }
	t.Cleanup(release)
	db := &faultyDB{Beginner: s.Beginner, match: func(q string) bool {
		if !isMarkProcessed(q) {
			return false
		}
		switch marks.Add(1) {
		case 1:
			// Batch 1's finalize waits until batches 2 and 3 are sent.
			close(held)
			<-proceed
			return false
		case 2:
			failed.Store(q)
			return true
		}
		return false
	}}
	db.fails.Store(1)
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.BatchSize = 10
	s.startPoller(t, db, rec, cfg)
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("batch 1 was never finalized")
	}
	eventually(t, "batches 2 and 3 sent during batch 1's finalize", func() bool { return rec.delivered() == 30 })
	require.Equal(t, 10, s.status(t, "PENDING"), "never more than MaxBatchesInFlight (3) batches held")
	release()

	_, merges := s.Dialect.(dialects.ClaimsFinalizer)
	require.True(t, merges, "every dialect merges the finalizes ready together")
	const lost = 20 // batches 2 and 3, in one statement (PostgreSQL) or one transaction
	eventually(t, "batches 1 and 4 PROCESSED, the lost finalize's rows IN_PROCESS", func() bool {
		return s.status(t, "PROCESSED") == 40-lost && s.status(t, "IN_PROCESS") == lost
	})
	if tg.Name == "postgres" {
		require.Contains(t, failed.Load(), "unnest", "the lost statement is the merged finalize of batches 2 and 3")
	}
	stepUntil(t, s.clock, waitersPerPoller, time.Second, 15*time.Minute, func() bool { return s.status(t, "PROCESSED") == 40 })
	for i, id := range ids {
		want := 1
		if i >= 10 && i < 10+lost {
			want = 2 // sent again after the recovery
		}
		require.Len(t, rec.of(id), want, "event %d", i)
	}
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"), "no attempt counted")
}

// A merged finalize marks the rows of each claim under that claim's token
// only: a claim recovered and taken again by another instance meanwhile
// (a stale batch) is left to its new holder, while the other batch of the
// same statement is marked, and only the marked ids are reported.
func testMergedFinalizeSkipsAStaleBatch(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	s.publish(t, s.clock, "order-created", 6)
	claim := func(token oncebox.EventID, now time.Time) []oncebox.EventID {
		evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "order-created", Limit: 3, Token: token, Now: now})
		require.NoError(t, err)
		require.Len(t, evs, 3)
		return claimedIDs(evs)
	}
	stale, live, thief := newID(t), newID(t), newID(t)
	staleIDs := claim(stale, t0)
	liveIDs := claim(live, t0.Add(200*time.Second))
	// Only the first claim is older than max-batch-processing-time.
	now := t0.Add(301 * time.Second)
	n, err := s.recoverClaimedBefore(ctx, now.Add(-300*time.Second), now, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.ElementsMatch(t, staleIDs, claim(thief, now), "the stale claim's rows were taken by another instance")

	claims := []dialects.ClaimIDs{{Token: stale, IDs: staleIDs}, {Token: live, IDs: liveIDs}}
	m, ok := s.Dialect.(dialects.ClaimsFinalizer)
	require.True(t, ok)
	marked, err := m.MarkProcessedClaims(ctx, s.Beginner, claims, now)
	require.NoError(t, err)
	require.ElementsMatch(t, liveIDs, marked, "only the live batch is marked and reported")
	in, args := s.inList(2, staleIDs)
	require.Equal(t, 3, s.Count(t, s.Tables.Events, "status = 'IN_PROCESS' AND claim_token = "+s.P(1)+" AND id IN ("+in+")",
		append([]any{s.ID(thief)}, args...)...), "the stale batch's rows are untouched, held by their new claim")
	require.Equal(t, 3, s.status(t, "PROCESSED"))
}
