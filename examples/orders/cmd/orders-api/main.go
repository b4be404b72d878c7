// Command orders-api is the orders service of the orders example: an HTTP
// API that writes each order and its order-created event in one PostgreSQL
// transaction (oncebox's transactional outbox), and, in the same process,
// the relay that delivers the events to Kafka or RabbitMQ.
//
//	POST /orders       {"customer_id": "c-1", "items": [{"sku": "SKU-001", "qty": 2}]} → 201 {"id": …}
//	GET  /orders/{id}  the order and its status
//	GET  /healthz
//
// Run as many instances as you like: their relays share the outbox without
// a coordinator. -mode=api serves the API without a relay and -mode=relay
// runs only the relay (and /healthz), for teams that deploy the relay as
// its own process. The schema (-schema, default orders_api) is migrated at
// start; in production run migrations as a deploy step.
//
// Every flag has an environment fallback, shown by -h. It stops gracefully
// on SIGINT or SIGTERM: the listener closes, requests in flight finish, the
// relay finishes or releases its batches.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/api"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/brokers"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/cli"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
)

const name = "orders-api"

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := cli.NewFlagSet(name, os.Stderr)
	addr := fs.String("http", "HTTP_ADDR", "127.0.0.1:8080", "HTTP listen address")
	dsn := fs.String("database-url", "DATABASE_URL", cli.DefaultDatabaseURL, "PostgreSQL URL")
	schema := fs.String("schema", "DB_SCHEMA", api.DefaultSchema, "PostgreSQL schema of the service's tables and its oncebox tables")
	broker := fs.String("broker", "BROKER", cli.DefaultBroker, "broker the relay publishes to: kafka or rabbitmq")
	kafkaBrokers := fs.String("kafka-brokers", "KAFKA_BROKERS", "127.0.0.1:9092", "Kafka bootstrap brokers, comma-separated")
	amqpURL := fs.String("amqp-url", "AMQP_URL", cli.DefaultAMQPURL, "RabbitMQ URL")
	configPath := fs.String("config", "", cli.DefaultConfigPath(), "oncebox configuration file ($ONCEBOX_CONFIG)")
	topic := fs.String("topic", "ORDERS_TOPIC", "", "topic (RabbitMQ queue) of order-created events; default: oncebox.yaml's")
	mode := fs.String("mode", "MODE", "all", "all: API and relay; api: API only (the relay runs elsewhere); relay: relay only")
	logLevel := fs.String("log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(cli.ExitUsage, err)
	}
	if *mode != "all" && *mode != "api" && *mode != "relay" {
		return fail(cli.ExitUsage, fmt.Errorf("-mode %q: want all, api or relay", *mode))
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
	relay := *mode != "api"
	bcfg := brokers.Config{Kind: *broker, KafkaBrokers: cli.SplitList(*kafkaBrokers), AMQPURL: *amqpURL}
	if relay {
		if err := bcfg.Validate(); err != nil {
			return fail(cli.ExitUsage, err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgdb.Connect(ctx, *dsn)
	if err != nil {
		return fail(cli.ExitFailure, err)
	}
	defer pool.Close()

	apiCfg := api.Config{Pool: pool, Schema: *schema, Oncebox: cfg, DisableAPI: *mode == "relay", Logger: logger}
	if relay {
		relayPub, err := brokers.NewPublisher(bcfg, []string{eventsTopic}, logger)
		if err != nil {
			return fail(cli.ExitFailure, fmt.Errorf("relay: %w", err))
		}
		// Closed after Run, which returns once the relay stopped using it.
		defer relayPub.Close()
		apiCfg.Relay = relayPub
	}
	srv, err := api.New(ctx, apiCfg)
	if err != nil {
		return fail(cli.ExitFailure, err)
	}
	logger.Info("Starting", watermill.LogFields{"http": *addr, "mode": *mode, "broker": *broker, "topic": eventsTopic})
	if err := srv.Run(ctx, *addr); err != nil {
		return fail(cli.ExitFailure, err)
	}
	return 0
}

func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return code
}
