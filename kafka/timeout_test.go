package kafka_test

import (
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/poller"
)

// newRelay builds (does not run) a poller over pub with the default
// max-batch-processing-time (300s).
func newRelay(t *testing.T, pub *kafka.Publisher) error {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbtest.PostgresDSN()) // connects lazily
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	_, err = poller.New(wsql.BeginnerFromPgx(pool), pub, poller.Config{Dialect: d, EventTypes: []string{"a"}}, nil)
	return err
}

// The relay refuses a Kafka publisher that could still be waiting for the
// cluster when max-batch-processing-time sends its batch again; the
// recommended configuration is well below it.
func TestRelayRefusesAPublisherSlowerThanMaxBatchProcessingTime(t *testing.T) {
	t.Parallel()
	_, addrs := newCluster(t, kfake.SeedTopics(1, "orders"))
	pub := newPublisher(t, addrs, nil)
	require.Equal(t, 190*time.Second, pub.SendTimeout(), "recommended: 10s metadata + 6 attempts × 30s")
	require.NoError(t, newRelay(t, pub))

	slow := kafka.RecommendedSaramaConfig()
	slow.Net.ReadTimeout = 2 * time.Minute
	pub = newPublisher(t, addrs, slow)
	err := newRelay(t, pub)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "max-batch-processing-time 5m0s")
	require.ErrorContains(t, err, "12m10s")
}
