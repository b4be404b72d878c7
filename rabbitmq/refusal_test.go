package rabbitmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
	"github.com/oncebox/watermill-oncebox/service"
)

// wrongPassword is the test broker's URL with a password it refuses.
func wrongPassword() string {
	return strings.Replace(brokerURL(), "guest:guest@", "guest:not-the-password@", 1)
}

// A wrong password is the broker refusing this client (403
// ACCESS_REFUSED), not an outage: the service's Run fails at start with an
// error naming the broker and the refusal (it used to start, log one ERROR
// and back off for ever).
func TestServiceRunFailsWhenTheBrokerRefusesThePassword(t *testing.T) {
	t.Parallel()
	schema := pgtest.NewSchema(t)
	pub, err := rabbitmq.NewPublisher(rabbitmq.PublisherConfig{URL: wrongPassword(), DialTimeout: 5 * time.Second}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	cfg, err := oncebox.LoadConfig(strings.NewReader("oncebox:\n  tables: {schema: " + strings.Split(schema.Dialect.Tables().Events, ".")[0] + "}\n"))
	require.NoError(t, err)
	svc, err := service.New(wsql.BeginnerFromPgx(schema.Pool), cfg, watermill.NopLogger{}, service.WithRelay(pub))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = svc.Run(ctx)
	require.Error(t, err, "Run must not wait for a broker that refused it")
	t.Logf("Run: %v", err)
	require.NoError(t, ctx.Err(), "Run returned at start, not at the test's deadline")
	require.ErrorIs(t, err, rabbitmq.ErrAccessRefused)
	require.ErrorContains(t, err, "127.0.0.1:5672")
	require.ErrorContains(t, err, "403")
	require.NotContains(t, err.Error(), "not-the-password")
}

// CheckBroker reports the refusal; ProbeBroker, which the relay asks
// during an outage, and a publish still see an unavailable broker (a
// password rotated while the service runs is waited out, no attempt is
// counted). A broker that cannot be reached is no refusal.
func TestCheckBrokerTellsARefusalFromAnOutage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refused := newPublisher(t, rabbitmq.PublisherConfig{URL: wrongPassword(), DialTimeout: 5 * time.Second})
	err := refused.CheckBroker(ctx)
	require.ErrorIs(t, err, rabbitmq.ErrAccessRefused)
	require.ErrorContains(t, err, "ACCESS_REFUSED")
	require.ErrorIs(t, refused.ProbeBroker(ctx), oncebox.ErrBrokerUnavailable)
	require.ErrorIs(t, refused.Publish("oncebox-test-refused", event(1)), oncebox.ErrBrokerUnavailable)

	require.NoError(t, newPublisher(t, rabbitmq.PublisherConfig{}).CheckBroker(ctx))
	down := newPublisher(t, rabbitmq.PublisherConfig{URL: "amqp://guest:guest@127.0.0.1:1/", DialTimeout: time.Second})
	require.NoError(t, down.CheckBroker(ctx), "an outage: the relay waits it out")
}
