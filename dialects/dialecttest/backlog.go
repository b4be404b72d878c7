package dialecttest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
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

	type group struct {
		kind, key, status string
		count             int64
		oldest            sql.NullTime
	}
	q := s.Dialect.Backlog()
	rows, err := s.DB.QueryContext(context.Background(), q.SQL, q.Args...)
	require.NoError(t, err)
	defer rows.Close()
	got := map[[3]string]group{}
	for rows.Next() {
		var g group
		require.NoError(t, rows.Scan(&g.kind, &g.key, &g.status, &g.count, &g.oldest))
		got[[3]string{g.kind, g.key, g.status}] = g
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 5)
	pending := got[[3]string{"outbox", "a", "PENDING"}]
	require.Equal(t, int64(3), pending.count)
	require.True(t, pending.oldest.Valid)
	require.True(t, pending.oldest.Time.Equal(t0), "the oldest created_at: %s", pending.oldest.Time)
	require.Equal(t, int64(1), got[[3]string{"outbox", "a", "PROCESSED"}].count)
	require.Equal(t, int64(2), got[[3]string{"outbox", "b", "PENDING"}].count)
	require.Equal(t, int64(1), got[[3]string{"dlq", "publisher", "MOVED"}].count)
	consumer := got[[3]string{"dlq", "consumer", "TO_RETRY"}]
	require.Equal(t, int64(2), consumer.count)
	require.False(t, consumer.oldest.Valid)
}
