package kafka_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// groupInstanceIDs returns the instance ids of group's members, sorted.
func groupInstanceIDs(t *testing.T, addrs []string, group string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	var ids []string
	for _, g := range resp.Groups {
		for _, m := range g.Members {
			id := "<dynamic>"
			if m.InstanceID != nil {
				id = *m.InstanceID
			}
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// One subscriber with StaticMember, subscribed to two topics: watermill-kafka
// makes a group member per topic, and under one instance id they fenced each
// other for ever (the group kept one member at a time, and redelivered).
// kafka.NewSubscriber gives each topic's member its own id, id + "-" +
// topic: both stay in the group.
func TestStaticMemberOnTwoTopicsGetsAnInstanceIDPerTopic(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders", "invoices"))
	cfg := kafka.RecommendedSubscriberConfig(addrs, "shipping", kafka.StaticMember("pod-0"))
	sub, err := kafka.NewSubscriber(cfg, watermill.NopLogger{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sub.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pub := newPublisher(t, addrs, fastFailConfig())
	for _, topic := range []string{"orders", "invoices"} {
		msgs, err := sub.Subscribe(ctx, topic)
		require.NoError(t, err)
		require.NoError(t, pub.Publish(topic, message.NewMessage(watermill.NewUUID(), []byte(topic))))
		select {
		case m := <-msgs:
			require.Equal(t, topic, string(m.Payload))
			m.Ack()
		case <-ctx.Done():
			t.Fatalf("nothing received from %s", topic)
		}
	}
	want := []string{"pod-0-invoices", "pod-0-orders"}
	var got []string
	for ctx.Err() == nil {
		if got = groupInstanceIDs(t, addrs, "shipping"); slices.Equal(got, want) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.Equal(t, want, got, "a member per topic, each under its own instance id")
}

// The instance id of a topic's member is id + "-" + topic, within Kafka's
// 249 characters and its alphabet.
func TestStaticInstanceID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pod-0-orders", kafka.StaticInstanceID("pod-0", "orders"))
	long := kafka.StaticInstanceID(strings.Repeat("p", 200), strings.Repeat("t", 200))
	require.LessOrEqual(t, len(long), 249)
	require.NotEqual(t, long, kafka.StaticInstanceID(strings.Repeat("p", 200), strings.Repeat("t", 199)+"u"), "long topics stay apart")
	require.Regexp(t, `^[0-9a-zA-Z._-]+$`, kafka.StaticInstanceID("pod 0", "a/b"))
}
