package dialecttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

// Batches larger than one statement's parameters or IN-list take (Oracle:
// 1,000 values; MySQL: 65,535 parameters) are split by the dialect and still
// finalized, and reported, exactly.
func testLargeBatches(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	const n = 3_600
	ids := s.publish(t, s.clock, "big", n)
	token := newID(t)
	evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "big", Limit: n, Token: token, Now: t0})
	require.NoError(t, err)
	require.Len(t, evs, n)

	marked, err := s.Dialect.MarkProcessed(ctx, s.Beginner, token, ids[:1_200], t0)
	require.NoError(t, err)
	require.ElementsMatch(t, ids[:1_200], marked)
	failed := make([]dialects.FailedEvent, 1_200)
	for i, id := range ids[1_200:2_400] {
		failed[i] = dialects.FailedEvent{ID: id, Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: t0.Add(time.Duration(i) * time.Second), Error: fmt.Sprint("e", i)}
	}
	affected, err := s.Dialect.MarkFailed(ctx, s.Beginner, token, failed, t0)
	require.NoError(t, err)
	require.Equal(t, int64(1_200), affected)
	affected, err = s.Dialect.ReleaseClaims(ctx, s.Beginner, token, ids[2_400:], t0)
	require.NoError(t, err)
	require.Equal(t, int64(1_200), affected)

	require.Equal(t, 1_200, s.status(t, "PROCESSED"))
	require.Equal(t, 2_400, s.status(t, "PENDING"))
	require.Equal(t, 1_200, s.Count(t, s.Tables.Events, "retry_count = 1"))
	last := failed[len(failed)-1]
	require.Equal(t, 1, s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND next_retry_at = "+s.P(2)+" AND last_error = "+s.P(3),
		s.ID(last.ID), last.NextRetryAt, last.Error), "each row its own state")

	// The batch inbox: 3,000 keys, then 3,000 half of which are known.
	batch := subscriber.BatchInbox{Dialect: s.Dialect}
	keys := make([]string, 4_500)
	for i := range keys {
		keys[i] = newID(t).String()
	}
	tx := s.begin(t)
	fresh, err := batch.RecordNew(ctx, tx, keys[:3_000])
	require.NoError(t, err)
	require.Len(t, fresh, 3_000)
	require.NoError(t, tx.Commit())
	tx = s.begin(t)
	fresh, err = batch.RecordNew(ctx, tx, keys[1_500:])
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	require.Len(t, fresh, 1_500)
	for _, k := range keys[3_000:] {
		require.True(t, fresh[k], k)
	}
	require.Equal(t, 4_500, s.Count(t, s.Tables.Inbox, ""))
}
