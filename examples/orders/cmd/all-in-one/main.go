// Command all-in-one runs the whole orders example in one process, with no
// Docker: the orders API with its relay, the shipping consumer and the
// traffic generator, for a bounded time. On Kafka it starts an in-process
// cluster unless KAFKA_BROKERS names one; on RabbitMQ it uses the local
// server and declares the durable queue it needs. Then it checks both
// services' databases: every order created has exactly one shipment, the
// stock reserved matches the quantities ordered, the poison event was parked
// and the duplicates were dropped. It exits 1 on any loss, double or
// unexpected answer.
//
//	go run ./examples/orders/cmd/all-in-one                    # Kafka in-process, 15s
//	BROKER=rabbitmq go run ./examples/orders/cmd/all-in-one    # the local RabbitMQ
//
// Each run uses schemas, a topic (queue) and a consumer group of its own,
// suffixed with -run-id, and removes them at the end unless -keep.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/allinone"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/cli"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/traffic"
)

const name = "all-in-one"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet(name, stderr)
	broker := fs.String("broker", "BROKER", cli.DefaultBroker, "kafka or rabbitmq")
	kafkaBrokers := fs.String("kafka-brokers", "KAFKA_BROKERS", "", "Kafka bootstrap brokers, comma-separated; empty: an in-process Kafka")
	amqpURL := fs.String("amqp-url", "AMQP_URL", cli.DefaultAMQPURL, "RabbitMQ URL")
	dsn := fs.String("database-url", "DATABASE_URL", cli.DefaultDatabaseURL, "PostgreSQL URL")
	redisAddr := fs.String("redis-addr", "REDIS_ADDR", "", "Redis host:port of the shipping inbox's cache; empty: no cache")
	configPath := fs.String("config", "", cli.DefaultConfigPath(), "oncebox configuration file ($ONCEBOX_CONFIG)")
	httpAddr := fs.String("http", "HTTP_ADDR", "127.0.0.1:0", "listen address of the orders API; port 0: a free one")
	runID := fs.String("run-id", "RUN_ID", "", "suffix of the run's schemas, topic and consumer group; default: random")
	keep := fs.Bool("keep", "", false, "keep the run's schemas, topic or queue and cache keys at the end")
	duration := fs.Duration("duration", "TRAFFIC_DURATION", 15*time.Second, "how long the traffic runs")
	rate := fs.Float64("rate", "TRAFFIC_RATE", 50, "orders per second")
	invalid := fs.Float64("invalid", "TRAFFIC_INVALID", 0.1, "fraction of requests that are invalid on purpose")
	seed := fs.Int("seed", "TRAFFIC_SEED", 0, "seed of the request sequence; 0: random")
	poison := fs.Int("poison", "", 1, "malformed events to write to the outbox; each must be parked")
	dups := fs.Int("duplicates", "", 10, "delivered events to send again; the inbox must drop each")
	drainTimeout := fs.Duration("drain-timeout", "", 30*time.Second, "longest wait, after the traffic, for every order to be shipped")
	logLevel := fs.String("log-level", "LOG_LEVEL", "warn", "services' log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cli.ExitUsage
	}
	if *seed < 0 {
		fmt.Fprintf(stderr, "%s: -seed %d: want 0 or more\n", name, *seed)
		return cli.ExitUsage
	}
	if *rate <= 0 || *duration <= 0 {
		fmt.Fprintf(stderr, "%s: -rate %g and -duration %s: both must be more than 0\n", name, *rate, *duration)
		return cli.ExitUsage
	}
	_, logger, err := cli.NewLogger(stderr, *logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cli.ExitUsage
	}
	o := allinone.Options{Broker: *broker, KafkaBrokers: cli.SplitList(*kafkaBrokers), AMQPURL: *amqpURL,
		DatabaseURL: *dsn, RedisAddr: *redisAddr, ConfigPath: *configPath, RunID: *runID, Keep: *keep,
		HTTPAddr: *httpAddr, Poison: *poison, Duplicates: *dups, DrainTimeout: *drainTimeout,
		Traffic: traffic.Config{Rate: *rate, Duration: *duration, InvalidFraction: *invalid, Seed: uint64(*seed)},
		Logger:  logger, Out: stdout}
	if err := o.Validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cli.ExitUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := allinone.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "all-in-one: %s\n", rep)
	if problems := rep.Problems(); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stdout, "all-in-one: FAIL: %s\n", p)
		}
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "all-in-one: OK: every order created has exactly one shipment (lost=0 doubled=0)\n")
	return 0
}
