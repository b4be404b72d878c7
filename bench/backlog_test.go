package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// TestFillBacklogWritesWhatThePublisherWrites compares the rows of the
// set-based fill with a row the oncebox publisher wrote for the same message
// in the same table: every column alike but the ids, the message UUID and the
// times; the metadata is the caller's headers alone (the event id and type
// are columns); the ids are UUIDv7 and rise in insertion order.
func TestFillBacklogWritesWhatThePublisherWrites(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	ctx := context.Background()

	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: s.Dialect}, watermill.NopLogger{})
	require.NoError(t, err)
	msg := message.NewMessage(watermill.NewUUID(), orderPayload)
	msg.Metadata.Set("tenant", "acme")
	require.NoError(t, pub.Publish(relayEventType, msg))
	require.NoError(t, tx.Commit(ctx))

	const n = 5000 // more than the 4,096 ids of one millisecond
	require.NoError(t, fillBacklog(ctx, s.Pool, s.Dialect, relayEventType, n))

	// One group: the publisher's row and the filled ones differ in nothing
	// but what is unique to each row.
	rows, err := s.Pool.Query(ctx, `SELECT to_jsonb(e) - '{id,message_uuid,metadata,next_retry_at,created_at,updated_at}'::text[],
       metadata, substr(id::text, 15, 1),
       next_retry_at = created_at AND updated_at = created_at AND created_at < now(), count(*)
  FROM `+s.Dialect.Tables().Events+` e GROUP BY 1, 2, 3, 4`)
	require.NoError(t, err)
	type group struct {
		Rest, Metadata   map[string]any
		Version          string
		TimesAsPublished bool
		Count            int
	}
	groups, err := pgx.CollectRows(rows, pgx.RowToStructByPos[group])
	require.NoError(t, err)
	require.Len(t, groups, 1, "the filled rows differ from the publisher's: %+v", groups)
	require.Equal(t, n+1, groups[0].Count)
	require.Equal(t, "7", groups[0].Version)
	require.True(t, groups[0].TimesAsPublished)
	require.Equal(t, map[string]any{"tenant": "acme"}, groups[0].Metadata)

	// The claim's order, (next_retry_at, id), is the order written: the
	// filled rows' ids rise with their physical position.
	var outOfOrder int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM (
    SELECT id < lag(id) OVER (ORDER BY ctid) AS down FROM `+s.Dialect.Tables().Events+`
     WHERE message_uuid <> $1) o WHERE down`, msg.UUID).Scan(&outOfOrder))
	require.Zero(t, outOfOrder)
}

// TestBacklogScenario runs the backlog scenario at its smallest scale, with a
// forwarder deadline too short for the forwarder to finish: that is a figure
// of the table, not an error. The run's schema is gone afterwards.
func TestBacklogScenario(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := newEnv(ctx, pgtest.DSN(), "", 0.0001)
	require.NoError(t, err)
	t.Cleanup(e.close)
	e.forwarderDeadline = 50 * time.Millisecond

	rows, err := runBacklog(ctx, e)
	require.NoError(t, err)

	var cases []string
	for _, r := range rows {
		cases = append(cases, r.Case)
		require.Positive(t, r.Value, r.Case)
	}
	require.Equal(t, []string{
		"raw SQL claim-and-mark loop, 1 worker, batch 1000, backlog of 1,000",
		"raw SQL claim-and-mark loop, 1 worker, batch 1000, backlog of 10,000",
		"oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms, backlog of 1,000",
		"oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms, backlog of 10,000",
		"oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms), backlog of 1,000",
		"oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms), backlog of 10,000",
		"watermill forwarder, defaults, backlog of 1,000",
		"watermill forwarder, defaults, backlog of 3,000",
		"oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms: peak RSS draining 1,000",
		"oncebox poller, 1 instance, batch 1000, min-fixed-delay 1ms: peak RSS draining 10,000",
		"oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms): peak RSS draining 1,000",
		"oncebox poller, 1 instance, defaults (batch 200, min-fixed-delay 250ms): peak RSS draining 10,000",
	}, cases)
	for _, i := range []int{1, 3, 5, 9, 11} {
		require.True(t, rows[i-1].Baseline, rows[i-1].Case)
		require.InDelta(t, rows[i].Value/rows[i-1].Value, rows[i].Ratio, 1e-9, rows[i].Case)
	}
	for _, i := range []int{3, 5} {
		require.Contains(t, rows[i].Note, "ratio 10,000/1,000: ")
		require.Contains(t, rows[i].Note, "the raw loop's in this run: ")
	}
	require.True(t, strings.HasPrefix(rows[7].Note, "did not finish: "), rows[7].Note)
	require.Contains(t, rows[10].Note, "before the drain")
	require.Equal(t, "MiB (VmRSS)", rows[11].Unit)

	var left int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", benchSchema).Scan(&left))
	require.Zero(t, left, "the scenario left its schema %s behind", benchSchema)
}
