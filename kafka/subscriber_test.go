package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// subscribe starts watermill-kafka's subscriber on topic and closes it when
// the test ends.
func subscribe(t testing.TB, cfg kafkawm.SubscriberConfig, topic string) <-chan *message.Message {
	t.Helper()
	sub, err := kafkawm.NewSubscriber(cfg, watermill.NopLogger{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		require.NoError(t, sub.Close())
	})
	ch, err := sub.Subscribe(ctx, topic)
	require.NoError(t, err)
	return ch
}

// receive waits for the next message of ch.
func receive(t testing.TB, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		require.True(t, ok, "subscription closed")
		return m
	case <-time.After(15 * time.Second):
		require.FailNow(t, "no message within 15s")
		return nil
	}
}

func TestRoundTripThroughWatermillKafkaSubscriber(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(3, "orders"))
	pub := newPublisher(t, addrs, nil)

	const n = 30
	sent := map[string]*message.Message{}
	var msgs []*message.Message
	for i := range n {
		key := fmt.Sprintf("order-%d", i%4)
		if i%5 == 0 {
			key = ""
		}
		m := event(t, "order-created", key, []byte(fmt.Sprintf(`{"n":%d}`, i)))
		sent[m.UUID] = m
		msgs = append(msgs, m)
	}
	// Published before the group exists: OffsetOldest makes it read them.
	require.NoError(t, pub.Publish("orders", msgs...))

	ch := subscribe(t, kafka.RecommendedSubscriberConfig(addrs, "orders-service"), "orders")
	for range n {
		got := receive(t, ch)
		want, ok := sent[got.UUID]
		require.True(t, ok, "UUID %q restored", got.UUID)
		delete(sent, got.UUID)
		require.Equal(t, want.Payload, got.Payload)
		require.Equal(t, want.Metadata, got.Metadata, "metadata intact, and nothing added")
		key, _ := kafkawm.MessageKeyFromCtx(got.Context())
		require.Equal(t, want.Metadata.Get("oncebox_key"), string(key))
		got.Ack()
	}
	require.Empty(t, sent)
}

// committedOffset returns the offset group committed on partition 0 of
// topic, -1 when none.
func committedOffset(t testing.TB, addrs []string, group, topic string) int64 {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_3_0_0 // see RecommendedSubscriberConfig on kfake and OffsetFetch v6
	admin, err := sarama.NewClusterAdmin(addrs, cfg)
	require.NoError(t, err)
	defer admin.Close()
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0}})
	require.NoError(t, err)
	block := resp.GetBlock(topic, 0)
	require.NotNil(t, block)
	require.Equal(t, sarama.ErrNoError, block.Err)
	return block.Offset
}

// TestAutoCommitNeverCommitsAnUnackedMessage shows that neither
// auto-commit setting commits past a message whose handler has not
// returned: watermill-kafka marks a message on ack, and Sarama's
// auto-commit commits marked offsets only (unlike the Java client's
// enable.auto.commit, which commits what poll returned).
func TestAutoCommitNeverCommitsAnUnackedMessage(t *testing.T) {
	t.Parallel()
	for _, autoCommit := range []bool{true, false} {
		t.Run(fmt.Sprintf("auto-commit=%v", autoCommit), func(t *testing.T) {
			t.Parallel()
			_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
			pub := newPublisher(t, addrs, nil)
			for i := range 3 {
				require.NoError(t, pub.Publish("orders", event(t, "e", "k", []byte(fmt.Sprint(i)))))
			}

			cfg := kafka.RecommendedSubscriberConfig(addrs, "g")
			cfg.OverwriteSaramaConfig.Consumer.Offsets.AutoCommit.Enable = autoCommit
			cfg.OverwriteSaramaConfig.Consumer.Offsets.AutoCommit.Interval = 50 * time.Millisecond
			ch := subscribe(t, cfg, "orders")

			first := receive(t, ch)
			require.Equal(t, "0", string(first.Payload))
			first.Ack()
			require.Eventually(t, func() bool { return committedOffset(t, addrs, "g", "orders") == 1 },
				10*time.Second, 20*time.Millisecond, "the acked message's offset is committed")

			second := receive(t, ch) // its handler is "running": no ack yet
			require.Equal(t, "1", string(second.Payload))
			// Ten auto-commit intervals: nothing past the unacked message.
			time.Sleep(500 * time.Millisecond)
			require.Equal(t, int64(1), committedOffset(t, addrs, "g", "orders"))

			second.Ack()
			require.Eventually(t, func() bool { return committedOffset(t, addrs, "g", "orders") == 2 },
				10*time.Second, 20*time.Millisecond)
			third := receive(t, ch)
			require.Equal(t, "2", string(third.Payload))
			third.Nack() // a failed handler: redelivered, never committed
			again := receive(t, ch)
			require.Equal(t, third.UUID, again.UUID)
			require.Equal(t, int64(2), committedOffset(t, addrs, "g", "orders"))
			again.Ack()
		})
	}
}
