package publisher_test

import (
	"context"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestConfigValidateRefusesANegativeMaxDelay(t *testing.T) {
	t.Parallel()
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	err = publisher.Config{Dialect: pg, MaxDelay: -time.Second}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "publisher: Config.MaxDelay is -1s: must not be negative (zero: 720h0m0s)")
}

// WithDelay and WithDeliverAt, through PublishJSON and Emit: next_retry_at
// is the requested time on the publisher's clock, created_at is now, and
// the stored metadata carries Watermill's two delay keys.
func TestDelayOptionsSetNextRetryAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	at := now.Add(36 * time.Hour).Add(123 * time.Microsecond)
	emit := publisher.Emit(b.config, "emitted", func(context.Context, sql.ContextExecutor, string) (string, error) { return "done", nil },
		publisher.EmitOptions[string, string]{Message: []publisher.MessageOption{publisher.WithDeliverAt(at)}})
	require.NoError(t, b.inTx(t, true, func(tx pgx.Tx) error {
		pub, err := publisher.NewPublisher(sql.TxFromPgx(tx), b.config, nil)
		require.NoError(t, err)
		if _, err := publisher.PublishJSON(ctx, pub, "delayed", map[string]int{"n": 1}, publisher.WithDelay(90*time.Second)); err != nil {
			return err
		}
		_, err = emit(ctx, sql.TxFromPgx(tx), "in")
		return err
	}))
	got := b.stored(t)
	require.Len(t, got, 2)
	require.Equal(t, "delayed", got[0].EventType)
	require.True(t, got[0].NextRetryAt.Equal(now.Add(90*time.Second)), "WithDelay: %v", got[0].NextRetryAt)
	require.True(t, got[0].CreatedAt.Equal(now))
	require.Equal(t, "1m30s", got[0].Metadata[delay.DelayedForKey])
	require.Equal(t, now.Add(90*time.Second).Format(time.RFC3339Nano), got[0].Metadata[delay.DelayedUntilKey])
	require.True(t, got[1].NextRetryAt.Equal(at), "WithDeliverAt through Emit, to the microsecond: %v", got[1].NextRetryAt)
	require.Equal(t, at.Format(time.RFC3339Nano), got[1].Metadata[delay.DelayedUntilKey])
}
