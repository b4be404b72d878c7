package dialecttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The backlog query of the metrics and the CLI's report: outbox rows by
// event type and status with the oldest created_at, DLQ rows by source and
// status.
func testBacklog(t *testing.T, tg Target) {
	s := setup(t, tg)
	a := s.publish(t, s.clock, "a", 3)
	s.clock.Advance(time.Minute)
	s.publish(t, s.clock, "a", 1)
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
	require.Len(t, got, 5)
	pending := got[[3]string{"outbox", "a", "PENDING"}]
	require.Equal(t, int64(3), pending.Count)
	require.True(t, pending.Oldest.Valid)
	require.True(t, pending.Oldest.Time.Equal(t0), "the oldest created_at: %s", pending.Oldest.Time)
	require.Equal(t, int64(1), got[[3]string{"outbox", "a", "PROCESSED"}].Count)
	require.Equal(t, int64(2), got[[3]string{"outbox", "b", "PENDING"}].Count)
	require.Equal(t, int64(1), got[[3]string{"dlq", "publisher", "MOVED"}].Count)
	consumer := got[[3]string{"dlq", "consumer", "TO_RETRY"}]
	require.Equal(t, int64(2), consumer.Count)
	require.False(t, consumer.Oldest.Valid)
}
