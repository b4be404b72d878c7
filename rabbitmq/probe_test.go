package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/internal/tcpproxy"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

// ProbeBroker tells, without sending anything, whether the broker can be
// reached: nil while it can, unavailable while it is gone (a proxy killed
// in front of the real RabbitMQ), nil again once it is back.
func TestProbeBrokerFollowsTheBroker(t *testing.T) {
	t.Parallel()
	conn := admin(t)
	queue := uniqueName(t, "oncebox-test-probe")
	declareQueue(t, conn, queue)
	target := brokerAddr(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:0", target)
	addr := proxy.Addr()
	pub := newPublisher(t, rabbitmq.PublisherConfig{URL: urlVia(t, addr), DialTimeout: 5 * time.Second})
	ctx := context.Background()
	require.NoError(t, pub.ProbeBroker(ctx))

	proxy.Kill()
	// The publisher learns that the connection is gone from its next use
	// or from amqp091's reader; the probe dials then and fails.
	require.Eventually(t, func() bool { return pub.ProbeBroker(ctx) != nil }, 10*time.Second, 10*time.Millisecond)
	err := pub.ProbeBroker(ctx)
	require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable)
	require.NotContains(t, err.Error(), "guest:guest")
	require.Zero(t, queueDepth(t, conn, queue), "a probe sends nothing")

	tcpproxy.Start(t, addr, target)
	require.NoError(t, pub.ProbeBroker(ctx), "back")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, pub.ProbeBroker(cancelled), oncebox.ErrBrokerUnavailable)
}

// The relay refuses a RabbitMQ publisher whose ConfirmTimeout could still
// be running when max-batch-processing-time sends the batch again.
func TestRelayRefusesAConfirmTimeoutAboveMaxBatchProcessingTime(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), dbtest.PostgresDSN()) // connects lazily
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	relay := func(pub *rabbitmq.Publisher) error {
		_, err := poller.New(wsql.BeginnerFromPgx(pool), pub, poller.Config{Dialect: d, EventTypes: []string{"a"}}, nil)
		return err
	}
	require.NoError(t, relay(newPublisher(t, rabbitmq.PublisherConfig{})), "defaults: 10s + 30s")
	err = relay(newPublisher(t, rabbitmq.PublisherConfig{ConfirmTimeout: 5 * time.Minute}))
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "5m10s")
}
