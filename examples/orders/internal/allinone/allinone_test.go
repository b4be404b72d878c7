package allinone

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/brokers"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/traffic"
)

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

var (
	dsn       = env("ONCEBOX_TEST_POSTGRES_DSN", "postgres://root@127.0.0.1:5432/test?sslmode=disable")
	amqpURL   = env("ONCEBOX_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	redisAddr = env("ONCEBOX_TEST_REDIS_ADDR", "127.0.0.1:6379")
)

// runFlow runs the all-in-one flow for a few seconds of traffic and
// requires a clean report, then checks that the run left nothing behind.
func runFlow(t *testing.T, o Options) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Second)
	defer cancel()
	o.DatabaseURL = dsn
	o.ConfigPath = "../../oncebox.yaml"
	o.RunID = fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1_000_000_000, os.Getpid()%100_000)
	o.Traffic = traffic.Config{Rate: 40, Duration: 3 * time.Second, InvalidFraction: 0.1, Seed: 42}
	o.Poison = 1
	o.Duplicates = 10
	o.DrainTimeout = 12 * time.Second
	if testing.Verbose() {
		o.Out = os.Stdout
		o.Logger = watermill.NewStdLogger(false, false)
	}
	start := time.Now()
	rep, err := Run(ctx, o)
	t.Logf("%s in %s", rep, time.Since(start).Round(time.Millisecond))
	require.NoError(t, err)
	require.Empty(t, rep.Problems(), "the run is not clean: %s", rep)
	require.Greater(t, rep.Created, 50, "too few orders to show anything: %s", rep.Traffic)
	require.Equal(t, rep.Orders, rep.Shipped)
	require.Zero(t, rep.OutboxLeft, "outbox rows not PROCESSED at the end")

	// Nothing left behind.
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.schemata WHERE schema_name IN ($1, $2)`, rep.APISchema, rep.ShippingSchema).Scan(&n))
	require.Zero(t, n, "the run's schemas were not dropped")
	return rep
}

func TestAllInOneKafka(t *testing.T) {
	rep := runFlow(t, Options{Broker: brokers.Kafka, RedisAddr: redisAddr})
	require.Equal(t, "kafka", rep.Broker)
}

func TestAllInOneRabbitMQ(t *testing.T) {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	require.NoError(t, err, "this test needs RabbitMQ at %s: start it with `rabbitmq-server -detached` "+
		"(as root; `rabbitmqctl await_startup` waits until it is up), or set ONCEBOX_TEST_AMQP_URL", amqpURL)
	defer conn.Close()

	rep := runFlow(t, Options{Broker: brokers.RabbitMQ, AMQPURL: amqpURL})

	// The run's queue was deleted.
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(rep.Topic, true, false, false, false, nil)
	require.Error(t, err, "queue %s still exists", rep.Topic)
	require.True(t, strings.Contains(err.Error(), "NOT_FOUND"), "declare-passive %s: %v", rep.Topic, err)
}
