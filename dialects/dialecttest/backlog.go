package dialecttest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The backlog query of the metrics and the CLI's report: outbox rows by
// event type and status with the earliest next_retry_at (when the oldest
// due row came due: rows waiting for a delay or a retry are not lag), DLQ
// rows by source and status.
func testBacklog(t *testing.T, tg Target) {
	s := setup(t, tg)
	a := s.publish(t, s.clock, "a", 3)
	s.clock.Advance(time.Minute)
	s.publish(t, s.clock, "a", 1)
	// Type "w": its only row was published first and waits for a retry an
	// hour ahead: its lag is none, not its age.
	w := s.publish(t, clockwork.NewFakeClockAt(t0.Add(-time.Hour)), "w", 1)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 1 WHERE id = "+s.P(2),
		t0.Add(time.Hour), s.ID(w[0]))
	s.publish(t, s.clock, "b", 2)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED' WHERE id = "+s.P(1), s.ID(a[0]))
	s.insertDLQ(t, dlqRow{})
	s.insertDLQ(t, dlqRow{source: oncebox.DLQSourceConsumer, status: oncebox.DLQStatusToRetry})
	s.insertDLQ(t, dlqRow{source: oncebox.DLQSourceConsumer, status: oncebox.DLQStatusToRetry, noEventID: true})

	groups, err := s.Dialect.Backlog(context.Background(), s.Beginner)
	require.NoError(t, err)
	got := map[[3]string]dialects.BacklogRow{}
	for _, g := range groups {
		got[[3]string{string(g.Table), g.Key, g.Status}] = g
	}
	require.Len(t, got, 6)
	pending := got[[3]string{"outbox", "a", "PENDING"}]
	require.Equal(t, int64(3), pending.Count)
	require.True(t, pending.Oldest.Valid)
	require.True(t, pending.Oldest.Time.Equal(t0), "the oldest created_at: %s", pending.Oldest.Time)
	waiting := got[[3]string{"outbox", "w", "PENDING"}]
	require.Equal(t, int64(1), waiting.Count)
	require.True(t, waiting.Oldest.Time.Equal(t0.Add(time.Hour)),
		"a row waiting for its retry counts from its next_retry_at, not its created_at (t0-1h): %s", waiting.Oldest.Time)
	require.Equal(t, int64(1), got[[3]string{"outbox", "a", "PROCESSED"}].Count)
	require.Equal(t, int64(2), got[[3]string{"outbox", "b", "PENDING"}].Count)
	require.Equal(t, int64(1), got[[3]string{"dlq", "publisher", "MOVED"}].Count)
	consumer := got[[3]string{"dlq", "consumer", "TO_RETRY"}]
	require.Equal(t, int64(2), consumer.Count)
	require.False(t, consumer.Oldest.Valid)
}
