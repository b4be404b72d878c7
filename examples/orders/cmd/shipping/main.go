// Command shipping is the consuming service of the orders example: a
// Watermill router subscribed to the order-created events (a Kafka consumer
// group, or a durable RabbitMQ queue) with oncebox's poison queue,
// Watermill's Retry and oncebox's inbox, whose handler reserves stock,
// creates a shipment and marks the order shipment_pending in the inbox's
// transaction. A redelivered event is dropped by the inbox; one that keeps
// failing is parked in the DLQ table. Everything oncebox does is built by
// service.New from oncebox.yaml; beside the router it runs the inbox
// clean-up, the DLQ retry and the relay that sends a retried message back
// to its topic (so it needs the broker's address to publish too).
//
//	GET /healthz
//	GET /shipments/{order_id}  the order's shipping status and shipments
//
// -redis-addr puts a Redis cache in front of the inbox table (named after
// oncebox.yaml's inbox.cache.cache-name, else the schema). The schema
// (-schema, default shipping) is migrated at start; in production run
// migrations as a deploy step. Every flag has an environment fallback,
// shown by -h. It stops gracefully on SIGINT or SIGTERM: handlers in flight
// finish and commit, or roll back and are redelivered later.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/redis/go-redis/v9"

	"github.com/oncebox/watermill-oncebox/cache/rediscache"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/brokers"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/cli"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/shipping"
)

const name = "shipping"

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := cli.NewFlagSet(name, os.Stderr)
	addr := fs.String("http", "HTTP_ADDR", "127.0.0.1:8081", "HTTP listen address of /healthz and /shipments; empty: no HTTP")
	dsn := fs.String("database-url", "DATABASE_URL", cli.DefaultDatabaseURL, "PostgreSQL URL")
	schema := fs.String("schema", "DB_SCHEMA", shipping.DefaultSchema, "PostgreSQL schema of the service's tables and its oncebox tables")
	broker := fs.String("broker", "BROKER", cli.DefaultBroker, "broker to consume from: kafka or rabbitmq")
	kafkaBrokers := fs.String("kafka-brokers", "KAFKA_BROKERS", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated")
	amqpURL := fs.String("amqp-url", "AMQP_URL", cli.DefaultAMQPURL, "RabbitMQ URL")
	group := fs.String("consumer-group", "CONSUMER_GROUP", "shipping", "Kafka consumer group of the service")
	redisAddr := fs.String("redis-addr", "REDIS_ADDR", "", "Redis host:port of the inbox cache; empty: no cache")
	configPath := fs.String("config", "", cli.DefaultConfigPath(), "oncebox configuration file ($ONCEBOX_CONFIG)")
	topic := fs.String("topic", "ORDERS_TOPIC", "", "topic (RabbitMQ queue) of order-created events; default: oncebox.yaml's")
	logLevel := fs.String("log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(cli.ExitUsage, err)
	}
	_, logger, err := cli.NewLogger(os.Stderr, *logLevel)
	if err != nil {
		return fail(cli.ExitUsage, err)
	}
	cfg, eventsTopic, err := cli.LoadOncebox(*configPath, *topic)
	if err != nil {
		return fail(cli.ExitUsage, err)
	}
	if _, err := pgdb.Dialect(*schema); err != nil {
		return fail(cli.ExitUsage, fmt.Errorf("-schema: %w", err))
	}
	bcfg := brokers.Config{Kind: *broker, KafkaBrokers: cli.SplitList(*kafkaBrokers), AMQPURL: *amqpURL}
	if err := bcfg.Validate(); err != nil {
		return fail(cli.ExitUsage, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgdb.Connect(ctx, *dsn)
	if err != nil {
		return fail(cli.ExitFailure, err)
	}
	defer pool.Close()

	scfg := shipping.Config{Pool: pool, Schema: *schema, Oncebox: cfg, Logger: logger}
	if *redisAddr != "" {
		rc := redis.NewClient(&redis.Options{Addr: *redisAddr, ContextTimeoutEnabled: true})
		defer rc.Close()
		cacheName := cfg.Inbox.Cache.CacheName
		if cacheName == "" {
			cacheName = *schema
		}
		scfg.Cache, err = rediscache.New(rc, rediscache.Config{Name: cacheName, TTL: cfg.Inbox.Cache.TTL})
		if err != nil {
			return fail(cli.ExitUsage, err)
		}
		if err := rc.Ping(ctx).Err(); err != nil {
			// Not fatal: the inbox falls back to its table while Redis is away.
			logger.Error("Redis does not answer; the inbox will use its table until it does", err, watermill.LogFields{"addr": *redisAddr})
		}
	}
	// The relay of this service sends what an operator retried from the
	// DLQ back to the topic (`oncebox dlq retry`).
	relayPub, err := brokers.NewPublisher(bcfg, []string{eventsTopic}, logger)
	if err != nil {
		return fail(cli.ExitFailure, err)
	}
	defer relayPub.Close()
	scfg.Relay = relayPub
	sub, err := brokers.NewSubscriber(bcfg, *group, logger)
	if err != nil {
		return fail(cli.ExitFailure, err)
	}
	scfg.Subscriber = sub // closed by the service's router
	svc, err := shipping.New(ctx, scfg)
	if err != nil {
		_ = sub.Close()
		return fail(cli.ExitFailure, err)
	}
	var ln net.Listener
	if *addr != "" {
		if ln, err = net.Listen("tcp", *addr); err != nil {
			_ = sub.Close()
			return fail(cli.ExitFailure, fmt.Errorf("listen on %s: %w", *addr, err))
		}
	}
	logger.Info("Starting", watermill.LogFields{"http": *addr, "broker": *broker, "topic": eventsTopic, "cache": *redisAddr != ""})
	if err := svc.Run(ctx, ln); err != nil {
		return fail(cli.ExitFailure, err)
	}
	return 0
}

func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return code
}
