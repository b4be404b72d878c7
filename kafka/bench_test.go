package kafka_test

import (
	"fmt"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox/kafka"
)

// benchMessages is how many messages each benchmark operation sends.
const benchMessages = 20_000

// BenchmarkPublish compares, against kfake, the relay's two ways to send
// 20,000 events with acks=all and idempotence: watermill-kafka's publisher
// called once per message (one SendMessage round trip each, as
// components/forwarder does), and PublishBatch with the poller's batch sizes
// (one SendMessages round trip per batch). Each event looks like a relayed
// one: a 200-byte payload, the oncebox headers and one of 100 keys.
//
//	go test -run '^$' -bench . ./kafka
func BenchmarkPublish(b *testing.B) {
	msgs := make([]*message.Message, benchMessages)
	for i := range msgs {
		msgs[i] = event(b, "order-created", fmt.Sprintf("order-%d", i%100), make([]byte, 200))
	}

	b.Run("watermill-kafka/Publish-per-message", func(b *testing.B) {
		_, addrs := newCluster(b, kfake.SeedTopics(3, "orders"))
		pub, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{
			Brokers:               addrs,
			OverwriteSaramaConfig: kafka.RecommendedSaramaConfig(),
		}, watermill.NopLogger{})
		require.NoError(b, err)
		defer pub.Close()
		b.ResetTimer()
		for range b.N {
			for _, m := range msgs {
				if err := pub.Publish("orders", m); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(benchMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
	})

	for _, size := range []int{200, 1000} {
		b.Run(fmt.Sprintf("oncebox/PublishBatch-%d", size), func(b *testing.B) {
			_, addrs := newCluster(b, kfake.SeedTopics(3, "orders"))
			pub := newPublisher(b, addrs, nil)
			b.ResetTimer()
			for range b.N {
				for start := 0; start < len(msgs); start += size {
					results, err := pub.PublishBatch("orders", msgs[start:min(start+size, len(msgs))]...)
					if err != nil {
						b.Fatal(err)
					}
					for _, r := range results {
						if r != nil {
							b.Fatal(r)
						}
					}
				}
			}
			b.ReportMetric(float64(benchMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkConsume measures watermill-kafka's subscriber with
// RecommendedSubscriberConfig reading and acking events of one partition
// (no handler work), with Sarama's auto-commit (marked offsets committed
// every second; 500 events an operation) and without it (watermill-kafka
// then commits synchronously on each ack; 20 events, as each can take up
// to Consumer.MaxWaitTime).
//
//	go test -run '^$' -bench Consume ./kafka
func BenchmarkConsume(b *testing.B) {
	for _, autoCommit := range []bool{true, false} {
		n := 500
		if !autoCommit {
			n = 20
		}
		b.Run(fmt.Sprintf("auto-commit=%v", autoCommit), func(b *testing.B) {
			_, addrs := newCluster(b, kfake.SeedTopics(1, "orders"))
			pub := newPublisher(b, addrs, nil)
			msgs := make([]*message.Message, n)
			for i := range msgs {
				msgs[i] = event(b, "order-created", "order", make([]byte, 200))
			}
			for range b.N {
				require.NoError(b, pub.Publish("orders", msgs...))
			}
			cfg := kafka.RecommendedSubscriberConfig(addrs, "bench")
			cfg.OverwriteSaramaConfig.Consumer.Offsets.AutoCommit.Enable = autoCommit
			ch := subscribe(b, cfg, "orders")
			receive(b, ch).Ack() // the group has joined
			b.ResetTimer()
			for range n*b.N - 1 {
				receive(b, ch).Ack()
			}
			b.ReportMetric(float64(n*b.N-1)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
