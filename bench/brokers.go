package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// runBrokers measures relay throughput from a backlog to a real broker: the
// in-process Kafka (kfake, acks=all, idempotent producer) and the local
// RabbitMQ (persistent messages, publisher confirms). Watermill's forwarder,
// tuned (poll 10ms, batch 1,000) so that the database side is not its limit,
// publishes through watermill-kafka and watermill-amqp, one message per
// round trip; the oncebox poller (batch 1,000, min-fixed-delay 1ms) publishes
// through oncebox's kafka and rabbitmq publishers, one round trip per batch.
// The forwarder is the baseline of each broker.
func runBrokers(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, relayEventType))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	amqpURL := envOr("ONCEBOX_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	queue := "oncebox-bench-" + watermill.NewShortUUID()
	tuned := oncebox.EventSettings{BatchSize: 1000, Polling: oncebox.PollingSettings{
		MinFixedDelay: time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}}

	nKafka := e.n(60_000, 1_000)
	nRabbit := e.n(10_000, 500)
	type brokerCase struct {
		name     string
		n        int
		baseline bool
		note     string
		drain    func(ctx context.Context, n int) (time.Duration, error)
	}
	cases := []brokerCase{
		{name: "Kafka: watermill forwarder → watermill-kafka publisher", n: nKafka, baseline: true,
			note: "acks=all, idempotent; one SendMessage per message",
			drain: func(ctx context.Context, n int) (time.Duration, error) {
				pub, err := kafkawm.NewPublisher(kafkawm.PublisherConfig{Brokers: brokers, Marshaler: kafkawm.DefaultMarshaler{},
					OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()}, watermill.NopLogger{})
				if err != nil {
					return 0, err
				}
				defer pub.Close()
				return drainForwarderTo(ctx, e, pub, n)
			}},
		{name: "Kafka: oncebox poller → oncebox kafka publisher", n: nKafka,
			note: "acks=all, idempotent; one SendMessages per batch; goal ≥ 5× the forwarder",
			drain: func(ctx context.Context, n int) (time.Duration, error) {
				pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, watermill.NopLogger{})
				if err != nil {
					return 0, err
				}
				defer pub.Close()
				return drainPollersTo(ctx, e, pub, n, tuned)
			}},
		{name: "RabbitMQ: watermill forwarder → watermill-amqp publisher", n: nRabbit, baseline: true,
			note: "durable queue, persistent, confirms on: one confirm awaited per message",
			drain: func(ctx context.Context, n int) (time.Duration, error) {
				cfg := amqpwm.NewDurableQueueConfig(amqpURL)
				cfg.Publish.ConfirmDelivery = true
				cfg.Queue.GenerateName = amqpwm.GenerateQueueNameConstant(queue)
				pub, err := amqpwm.NewPublisher(cfg, watermill.NopLogger{})
				if err != nil {
					return 0, err
				}
				defer pub.Close()
				return drainForwarderTo(ctx, e, pub, n)
			}},
		{name: "RabbitMQ: oncebox poller → oncebox rabbitmq publisher", n: nRabbit,
			note: "durable queue, persistent, mandatory; a batch's confirms awaited together, spread over 4 confirm channels (SpreadUnkeyed: the backlog has no keys); goal ≥ 10× the forwarder",
			drain: func(ctx context.Context, n int) (time.Duration, error) {
				// The backlog's events have no key: SpreadUnkeyed spreads each
				// batch over the publisher's 4 confirm channels per call.
				pub, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: amqpURL, SpreadUnkeyed: true}, watermill.NopLogger{})
				if err != nil {
					return 0, err
				}
				defer pub.Close()
				if err := pub.DeclareDurableQueue(relayEventType); err != nil {
					return 0, err
				}
				return drainPollersTo(ctx, e, pub, n, tuned)
			}},
	}
	defer deleteQueues(amqpURL, queue, relayEventType)

	var rows, group []row
	for _, c := range cases {
		fmt.Fprintf(os.Stderr, "bench: brokers: %s…\n", c.name)
		took, err := c.drain(ctx, c.n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		if c.baseline && len(group) > 0 {
			rows = append(rows, withRatios(group)...)
			group = nil
		}
		group = append(group, row{Case: c.name, Value: float64(c.n) / took.Seconds(), Unit: "events/s", Baseline: c.baseline,
			Note: fmt.Sprintf("%d events in %.1fs; %s", c.n, took.Seconds(), c.note)})
	}
	return append(rows, withRatios(group)...), nil
}

// drainPollersTo relays a backlog of n events to out with one poller and
// returns the time until every event is marked PROCESSED.
func drainPollersTo(ctx context.Context, e *env, out message.Publisher, n int, s oncebox.EventSettings) (time.Duration, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return 0, err
	}
	if err := insertBacklog(ctx, wsql.BeginnerFromPgx(e.pool), d, relayEventType, n); err != nil {
		return 0, err
	}
	hooks := sentHooks{sent: newCountdown(n)}
	start := time.Now()
	stop, err := startPollers(ctx, wsql.BeginnerFromPgx(e.pool), out, pollerConfig(d, 0, relayEventType, s, hooks))
	if err != nil {
		return 0, err
	}
	waitErr := hooks.sent.wait(ctx, "events sent")
	took := time.Since(start)
	return took, errors.Join(waitErr, stop())
}

// drainForwarderTo relays a backlog of n messages to out with Watermill's
// forwarder (tuned) and returns the time until out accepted every one.
func drainForwarderTo(ctx context.Context, e *env, out message.Publisher, n int) (time.Duration, error) {
	if _, err := e.freshSchema(ctx); err != nil {
		return 0, err
	}
	if err := initForwarderSchema(pgWM(e.pool)); err != nil {
		return 0, err
	}
	if err := insertForwarderBacklog(pgWM(e.pool), relayEventType, n); err != nil {
		return 0, err
	}
	counted := &countingPublisher{Publisher: out, done: newCountdown(n)}
	start := time.Now()
	stop, err := startForwarder(ctx, pgWM(e.pool), counted, forwarderTuned)
	if err != nil {
		return 0, err
	}
	waitErr := counted.done.wait(ctx, "messages forwarded")
	took := time.Since(start)
	return took, errors.Join(waitErr, stop())
}

// countingPublisher counts the messages its publisher accepted.
type countingPublisher struct {
	message.Publisher
	done *countdown
}

func (c *countingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if err := c.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	c.done.add(len(msgs))
	return nil
}

// deleteQueues removes the bench's queues.
func deleteQueues(url string, queues ...string) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	for _, q := range queues {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
}
