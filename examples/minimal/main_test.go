package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// TestMinimalService runs the example against the machine's PostgreSQL and
// RabbitMQ: orders become shipments once each, a redelivered event ships
// nothing, a poison message is parked and shown by the DLQ API, and the
// metrics are served.
func TestMinimalService(t *testing.T) {
	dbURL := env("ONCEBOX_TEST_POSTGRES_DSN", "postgres://root@127.0.0.1:5432/test?sslmode=disable")
	amqpURL := env("ONCEBOX_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
	cfg, err := oncebox.LoadConfigFile("oncebox.yaml")
	require.NoError(t, err)
	suffix := randomSuffix(t)
	cfg.Tables.Schema = "minimal_" + suffix
	topic := "minimal-orders-" + suffix
	cfg.Outbox.Events = map[string]oncebox.EventSettings{"order-placed": {Topic: topic}}
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+cfg.Tables.Schema+" CASCADE")
		pool.Close()
		require.NoError(t, err)
		deleteQueue(t, amqpURL, topic)
	})
	t.Setenv("DLQ_TOKEN", "test-token")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, cfg, dbURL, amqpURL, ln) }()
	shipments := func() int {
		var n int
		if pool.QueryRow(context.Background(), "SELECT count(*) FROM "+cfg.Tables.Schema+".shipments").Scan(&n) != nil {
			return -1
		}
		return n
	}
	require.Eventually(t, func() bool { return shipments() == 0 }, time.Minute, 20*time.Millisecond, "started")

	for range 5 {
		require.Eventually(t, func() bool {
			resp, err := http.Post(base+"/orders", "application/json", nil)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusCreated
		}, time.Minute, 20*time.Millisecond)
	}
	require.Eventually(t, func() bool { return shipments() == 5 }, time.Minute, 20*time.Millisecond, "every order shipped")

	// A delivered event sent again (a relay that crashed before marking it
	// PROCESSED) and a message the handler cannot take.
	var shipped string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT event_id::text FROM "+cfg.Tables.Schema+".shipments LIMIT 1").Scan(&shipped))
	out, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: amqpURL}, nil)
	require.NoError(t, err)
	defer out.Close()
	dup := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
	dup.Metadata.Set(oncebox.HeaderEventID, shipped)
	poison := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
	poison.Metadata.Set(oncebox.HeaderEventID, "not-a-uuid")
	require.NoError(t, out.Publish(topic, dup, poison))

	get := func(path string) string {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(body)
	}
	require.Eventually(t, func() bool { return strings.Contains(get("/dlq/events/count"), `"count":1`) },
		time.Minute, 50*time.Millisecond, "the poison message parked and listed by the DLQ API")
	require.Eventually(t, func() bool {
		return strings.Contains(get("/metrics"), `oncebox_inbox_duplicates_total{inbox_namespace="ship-order",source="cache"} 1`)
	},
		time.Minute, 50*time.Millisecond, "the duplicate dropped and counted")
	require.Equal(t, 5, shipments(), "nothing shipped twice")

	cancel()
	require.NoError(t, <-errc)
}

func deleteQueue(t *testing.T, amqpURL, name string) {
	conn, err := amqp091.Dial(amqpURL)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDelete(name, false, false, false)
	require.NoError(t, err)
}

func randomSuffix(t *testing.T) string {
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
