package rabbitmq

import (
	"fmt"
	"strings"

	amqpwm "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
)

// RecommendedPrefetch is the prefetch count of RecommendedSubscriberConfig.
// watermill-amqp's subscriber hands one delivery at a time to the consumer
// and waits for its ack, so deliveries beyond the first only wait in the
// client: a few hide the round trip to the broker between two messages;
// many would keep messages from the other instances and redeliver more after
// a crash (never lose them: unacknowledged deliveries go back to the queue).
const RecommendedPrefetch = 10

// RecommendedSubscriberConfig is the watermill-amqp v3 configuration for a
// consumer behind the oncebox inbox, matching Publisher's defaults: the
// topic is a durable queue on the default exchange (what
// amqpwm.NewDurableQueueConfig declares, and DeclareDurableQueue), persistent
// messages, manual acknowledgement after the handler returned (the
// subscriber acks on msg.Ack and nacks with requeue on msg.Nack), a
// prefetch of RecommendedPrefetch, and reconnection with the default
// backoff.
//
// Use it with amqpwm.NewSubscriber(cfg, logger). Change the queue name
// (Queue.GenerateName) to consume a topic exchange's binding, and check the
// result with CheckSubscriberConfig.
func RecommendedSubscriberConfig(url string) amqpwm.Config {
	cfg := amqpwm.NewDurableQueueConfig(url)
	cfg.Connection.Reconnect = amqpwm.DefaultReconnectConfig()
	cfg.Marshaler = amqpwm.DefaultMarshaler{}
	cfg.Queue.Durable = true
	cfg.Queue.AutoDelete = false
	cfg.Queue.Exclusive = false
	cfg.Queue.NoWait = false
	cfg.Consume.NoRequeueOnNack = false
	cfg.Consume.NoWait = false
	cfg.Consume.Qos = amqpwm.QosConfig{PrefetchCount: RecommendedPrefetch}
	return cfg
}

// CheckSubscriberConfig returns a warning for each setting of cfg that lets
// an event be lost, dropped or skipped behind the inbox's back, or that
// keeps a subscriber from working; nil when there is none.
// RecommendedSubscriberConfig returns nil.
//
// watermill-amqp v3 has no auto-ack setting: its subscriber always consumes
// with autoAck false and acknowledges when the consumer calls msg.Ack. What
// amounts to acknowledging regardless of the handler's outcome is
// Consume.NoRequeueOnNack (a failed message is dropped or dead-lettered
// instead of redelivered), which is reported, and the router's InstantAck
// middleware, which no configuration shows (the inbox warns when it sees a
// message acked before it ran).
func CheckSubscriberConfig(cfg amqpwm.Config) []string {
	var w []string
	add := func(format string, args ...any) { w = append(w, fmt.Sprintf(format, args...)) }

	if cfg.Connection.AmqpURI == "" {
		add("Connection.AmqpURI is empty: the subscriber cannot connect")
	} else if err := checkURL(cfg.Connection.AmqpURI); err != nil {
		// watermill-amqp would pass on amqp091-go's parse error, which
		// quotes the URL with its password: report it here, redacted.
		add("Connection.AmqpURI %s %v: the subscriber cannot connect", redact(cfg.Connection.AmqpURI), err)
	}
	if cfg.Marshaler == nil {
		add("Marshaler is nil: the subscriber cannot decode messages; use amqpwm.DefaultMarshaler{}, which restores the UUID and the metadata the oncebox publisher writes")
	}
	if cfg.TopologyBuilder == nil {
		add("TopologyBuilder is nil: the subscriber panics when it declares the queue; use &amqpwm.DefaultTopologyBuilder{}")
	}
	if cfg.Queue.GenerateName == nil {
		add("Queue.GenerateName is nil: the subscriber has no queue to consume")
	}

	// The queue must outlive restarts and consumers.
	if !cfg.Queue.Durable {
		add("Queue.Durable is false: the queue and every event in it are lost when RabbitMQ restarts, after the relay marked them PROCESSED")
	}
	if cfg.Queue.AutoDelete {
		add("Queue.AutoDelete is true: the queue and its events are deleted when its last consumer goes away (a deploy), and events published meanwhile are unroutable")
	}
	if cfg.Queue.Exclusive {
		add("Queue.Exclusive is true: the queue is deleted with its connection, losing its events, and a second instance cannot consume it")
	}
	w = append(w, checkQueueArguments(cfg.Queue.Arguments)...)

	// A failed handler must see its message again.
	if cfg.Consume.NoRequeueOnNack {
		if _, dlx := cfg.Queue.Arguments["x-dead-letter-exchange"]; dlx {
			add("Consume.NoRequeueOnNack is true: a message whose handler failed is dead-lettered instead of redelivered, so the inbox never retries it; keep it false and let oncebox's PoisonQueue park poison messages")
		} else {
			add("Consume.NoRequeueOnNack is true: a message whose handler failed is dropped, as if acknowledged on receipt; keep it false and let oncebox's PoisonQueue park poison messages")
		}
	}
	if cfg.Consume.NoWait {
		add("Consume.NoWait is true: a consume the broker refuses closes the channel later instead of failing Subscribe")
	}
	if cfg.Queue.NoWait {
		add("Queue.NoWait is true: the queue is assumed to exist; a mismatch closes the channel later instead of failing Subscribe")
	}
	if cfg.Consume.Qos.PrefetchCount <= 0 && cfg.Consume.Qos.PrefetchSize <= 0 {
		add("Consume.Qos.PrefetchCount is %d: no limit, the broker pushes the whole queue to one consumer, starving the other instances; use a small number such as %d",
			cfg.Consume.Qos.PrefetchCount, RecommendedPrefetch)
	}

	// An exchange the queue is bound to must survive restarts too.
	if cfg.Exchange.GenerateName != nil && cfg.Exchange.GenerateName("oncebox") != "" {
		if !cfg.Exchange.Durable {
			add("Exchange.Durable is false: after a RabbitMQ restart the exchange and its bindings are gone, and published events are unroutable until a subscriber declares it again")
		}
		if cfg.Exchange.AutoDeleted {
			add("Exchange.AutoDeleted is true: the exchange is deleted with its last binding, and published events are unroutable until a subscriber declares it again")
		}
	}
	return w
}

// checkQueueArguments reports queue arguments that drop messages.
func checkQueueArguments(args map[string]any) []string {
	var w []string
	fate := "dropped"
	if _, dlx := args["x-dead-letter-exchange"]; dlx {
		fate = "dead-lettered without being handled"
	}
	if v, ok := args["x-message-ttl"]; ok {
		w = append(w, fmt.Sprintf("Queue.Arguments x-message-ttl=%v: an event not consumed in time is %s", v, fate))
	}
	if v, ok := args["x-expires"]; ok {
		w = append(w, fmt.Sprintf("Queue.Arguments x-expires=%v: the queue and its events are deleted after it is unused that long", v))
	}
	_, maxLen := args["x-max-length"]
	_, maxBytes := args["x-max-length-bytes"]
	if maxLen || maxBytes {
		overflow, _ := args["x-overflow"].(string)
		if !strings.HasPrefix(overflow, "reject-publish") {
			w = append(w, fmt.Sprintf("Queue.Arguments x-max-length/x-max-length-bytes with overflow drop-head: the oldest events are %s when the queue is full; use x-overflow reject-publish, which the oncebox publisher sees as a nack and retries", fate))
		}
	}
	if v, ok := args["x-delivery-limit"]; ok {
		w = append(w, fmt.Sprintf("Queue.Arguments x-delivery-limit=%v: a message redelivered that often is %s; let oncebox's PoisonQueue park poison messages instead", v, fate))
	}
	return w
}
