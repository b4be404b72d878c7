package kafka_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
)

// TestOrderedRelayToKafkaSendsSeveralEventsOfAKeyInOrder: an ordered type
// (ordering: key) relayed by two pollers to Kafka with the recommended
// producer, which keeps a key's order within a call (KeepsKeyOrder): the
// claims carry several events of a key, and each key's records are in
// one partition, in id order, each once.
func TestOrderedRelayToKafkaSendsSeveralEventsOfAKeyInOrder(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	pub := newPublisher(t, addrs, fastFailConfig())
	require.True(t, pub.KeepsKeyOrder())

	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{
		Defaults: oncebox.EventSettings{BatchSize: 40, Ordering: oncebox.OrderingKey, Polling: oncebox.PollingSettings{
			MinFixedDelay: 5 * time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}},
		Events: map[string]oncebox.EventSettings{"order-created": {Topic: "orders"}},
	}}
	var want []string
	for range 3 {
		for _, m := range commitEvents(t, s, cfg, 100, "n") {
			want = append(want, m.Metadata.Get(oncebox.HeaderEventID))
		}
	}
	for _, id := range []string{"A", "B"} {
		p, err := poller.New(s.Beginner, pub, poller.Config{Dialect: s.Dialect, Oncebox: cfg, InstanceID: id}, watermill.NopLogger{})
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() { errc <- p.Run(context.Background()) }()
		t.Cleanup(func() {
			require.NoError(t, p.Close())
			require.NoError(t, <-errc)
		})
	}

	recs := readRecords(t, addrs, "orders", len(want))
	require.Len(t, recs, len(want), "every event once")
	perKey := map[string][]oncebox.EventID{}
	partition := map[string]int32{}
	for _, r := range recs {
		k := string(r.Key)
		if p, ok := partition[k]; ok {
			require.Equal(t, p, r.Partition, "%s: one partition", k)
		}
		partition[k] = r.Partition
		id, err := oncebox.ParseEventID(headers(t, r)[oncebox.HeaderEventID])
		require.NoError(t, err)
		perKey[k] = append(perKey[k], id)
	}
	require.Len(t, perKey, 5)
	for k, ids := range perKey {
		for i := 1; i < len(ids); i++ {
			require.Negative(t, bytes.Compare(ids[i-1][:], ids[i][:]), "%s: %s after %s", k, ids[i], ids[i-1])
		}
	}
	events := s.Dialect.Tables().Events
	require.Eventually(t, func() bool { return s.Count(t, events, "status = 'PROCESSED'") == len(want) },
		10*time.Second, 10*time.Millisecond)
	var multi int
	require.NoError(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT 1 FROM `+events+`
 GROUP BY claim_token, partition_key HAVING count(*) > 1) g`).Scan(&multi))
	require.Positive(t, multi, "claims took several events of a key")
}

var _ poller.KeyOrderKeeper = (*kafka.Publisher)(nil)
