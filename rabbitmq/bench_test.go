package rabbitmq_test

import (
	"bytes"
	"strconv"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// BenchmarkPublish5000 sends 5,000 persistent messages (about 250-byte
// payloads, five headers) to a durable queue per iteration and reports
// messages per second:
//
//	go test -run '^$' -bench . -benchtime 3x ./rabbitmq
//
// watermill-amqp with ConfirmDelivery publishes one message per call, as the
// forwarder does, and waits for each confirm; ChannelPoolSize 0 (the
// presets' default) opens a channel per call. The oncebox publisher sends
// whole batches and waits for their confirms together.
func BenchmarkPublish5000(b *testing.B) {
	conn := admin(b)
	const total = 5000
	msgs := benchEvents(total)
	report := func(b *testing.B) {
		b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "msgs/s")
	}

	for _, pool := range []int{0, 1} {
		name := "watermill-amqp-confirm-one-per-call/channel-per-call"
		if pool > 0 {
			name = "watermill-amqp-confirm-one-per-call/channel-pool-1"
		}
		b.Run(name, func(b *testing.B) {
			queue := uniqueName(b, "oncebox-bench-wm")
			declareQueue(b, conn, queue)
			cfg := amqpwm.NewDurableQueueConfig(brokerURL())
			cfg.Publish.ConfirmDelivery = true
			cfg.Publish.ChannelPoolSize = pool
			pub, err := amqpwm.NewPublisher(cfg, watermill.NopLogger{})
			require.NoError(b, err)
			defer func() { require.NoError(b, pub.Close()) }()
			b.ResetTimer()
			for range b.N {
				for _, m := range msgs {
					if err := pub.Publish(queue, m); err != nil {
						b.Fatal(err)
					}
				}
				purge(b, conn, queue)
			}
			report(b)
		})
	}

	for _, size := range []int{1, 200, 1000} {
		name := "oncebox-PublishBatch/batch-" + strconv.Itoa(size)
		b.Run(name, func(b *testing.B) {
			queue := uniqueName(b, "oncebox-bench-ob")
			declareQueue(b, conn, queue)
			pub := newPublisher(b, rabbitmq.PublisherConfig{})
			b.ResetTimer()
			for range b.N {
				for start := 0; start < total; start += size {
					batch := msgs[start:min(start+size, total)]
					results, err := pub.PublishBatch(queue, batch...)
					if err != nil {
						b.Fatal(err)
					}
					if err := firstError(results); err != nil {
						b.Fatal(err)
					}
				}
				purge(b, conn, queue)
			}
			report(b)
		})
	}
}

// benchEvents is n events with about 250-byte payloads.
func benchEvents(n int) []*message.Message {
	msgs := events(n)
	for _, m := range msgs {
		m.Payload = append(m.Payload, bytes.Repeat([]byte(" "), 240)...)
	}
	return msgs
}

// purge empties queue, off the clock.
func purge(b *testing.B, conn *amqp.Connection, queue string) {
	b.StopTimer()
	defer b.StartTimer()
	ch, err := conn.Channel()
	require.NoError(b, err)
	_, err = ch.QueuePurge(queue, false)
	require.NoError(b, err)
	require.NoError(b, ch.Close())
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkRawSpread1000 is the measurement that decided spreading: amqp091
// alone, a 1,000-message batch split over 1, 2, 4 or 8 confirm channels
// published and confirmed in parallel.
func BenchmarkRawSpread1000(b *testing.B) {
	conn := admin(b)
	const total = 1000
	pubs := make([]amqp.Publishing, total)
	for i, m := range benchEvents(total) {
		pubs[i] = amqp.Publishing{Body: m.Payload, DeliveryMode: amqp.Persistent, MessageId: m.UUID,
			Headers: amqp.Table{"a": "b", "c": "d", "e": "f", "g": "h", "i": "j"}}
	}
	for _, n := range []int{1, 2, 4, 8} {
		b.Run("channels-"+strconv.Itoa(n), func(b *testing.B) {
			queue := uniqueName(b, "oncebox-bench-raw")
			declareQueue(b, conn, queue)
			chans := make([]*amqp.Channel, n)
			for i := range chans {
				ch, err := conn.Channel()
				require.NoError(b, err)
				require.NoError(b, ch.Confirm(false))
				chans[i] = ch
				defer ch.Close()
			}
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for c, ch := range chans {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var dcs []*amqp.DeferredConfirmation
						for i := c; i < total; i += n {
							dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, pubs[i])
							if err != nil {
								b.Error(err)
								return
							}
							dcs = append(dcs, dc)
						}
						for _, dc := range dcs {
							if !dc.Wait() {
								b.Error("nacked")
							}
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "msgs/s")
			purge(b, conn, queue)
		})
	}
}

// BenchmarkPublishBatch1000Spread sends batches of 1,000 persistent
// messages of 97 keys to one durable queue through the publisher, over
// ChannelsPerCall 1, 2, 4 and 8:
//
//	go test -run '^$' -bench PublishBatch1000Spread -benchtime 20x ./rabbitmq
func BenchmarkPublishBatch1000Spread(b *testing.B) {
	conn := admin(b)
	const total = 1000
	msgs := benchEvents(total)
	for i, m := range msgs {
		oncebox.SetKey(m, "key-"+strconv.Itoa(i%97))
	}
	for _, n := range []int{1, 2, 4, 8} {
		b.Run("channels-"+strconv.Itoa(n), func(b *testing.B) {
			queue := uniqueName(b, "oncebox-bench-spread")
			declareQueue(b, conn, queue)
			pub := newPublisher(b, rabbitmq.PublisherConfig{ChannelsPerCall: n})
			b.ResetTimer()
			for range b.N {
				results, err := pub.PublishBatch(queue, msgs...)
				if err != nil {
					b.Fatal(err)
				}
				if err := firstError(results); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(total*b.N)/b.Elapsed().Seconds(), "msgs/s")
			purge(b, conn, queue)
		})
	}
}
