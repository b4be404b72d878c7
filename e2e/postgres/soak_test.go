package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/pgcluster"
	"github.com/oncebox/watermill-oncebox/internal/soak"
)

// TestSoakTwoMinutes is the 60-minute soak of issue 28 item 8
// (docs/postgresql.md "A 60-minute run") cut to two minutes at 500
// events/s, on a cluster of its own with autovacuum on: every committed
// event delivered exactly once, nothing left unsent, and the outbox table
// not growing once the clean-up job (ttl 15s, every 5s) deletes what the
// relays sent. The latency and size bounds are loose on purpose: the
// figures are the bench's (go run ./bench -scenarios soak), this test
// catches a relay that falls behind or a clean-up that stops.
func TestSoakTwoMinutes(t *testing.T) {
	t.Parallel()
	c := pgcluster.New(t, pgcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const rate = 500
	res, err := soak.Run(ctx, soak.Options{DSN: c.PrimaryDSN, Duration: 2 * time.Minute, Rate: rate,
		CleanUpTTL: 15 * time.Second, CleanUpEvery: 5 * time.Second, Interval: 20 * time.Second,
		Producers: 8, Drain: time.Minute})
	require.NoError(t, err)
	t.Logf("soak, 2 minutes at %d events/s on %s:\n%s", rate, c.Name, res.Table())

	require.Positive(t, res.Committed)
	require.Zero(t, res.Lost, "committed events never delivered")
	require.Zero(t, res.Duplicates, "events delivered more than once")
	require.Equal(t, res.Committed, res.Delivered)
	require.Zero(t, res.Left, "outbox rows not PROCESSED after the drain")
	// Loose: the machine is shared and -race slows everything; a relay
	// that fell behind would show p99 in tens of seconds.
	require.Less(t, res.P99, 10*time.Second, "commit-to-publish p99 over the whole run")
	// Flat: at 500/s with a 15s ttl the table holds about 10,000 live rows
	// (a few MB); without the clean-up it would hold all 60,000. The
	// largest sample of the second half must not exceed twice the largest
	// of the first half plus slack, and the final size stays bounded.
	half := len(res.Samples) / 2
	var first, second int64
	for i, s := range res.Samples {
		if i < half {
			first = max(first, s.TotalBytes)
		} else {
			second = max(second, s.TotalBytes)
		}
	}
	require.LessOrEqual(t, second, 2*first+8<<20, "the outbox grew in the second half: %d bytes against %d", second, first)
	require.Less(t, res.FinalTotalBytes, int64(64<<20), "outbox total size after the drain")
}
