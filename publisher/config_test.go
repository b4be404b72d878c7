package publisher_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, publisher.Config{}.Validate(), "publisher: Config.Dialect is nil")
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.NoError(t, publisher.Config{Dialect: pg}.Validate())
	err = publisher.Config{Dialect: pg, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{MaxPayloadSize: -1}}}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "publisher: Config.Oncebox: oncebox: config outbox.max-payload-size: must be > 0")
}

func TestConfigValidateNamesTheWakeQueueFields(t *testing.T) {
	t.Parallel()
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	err = publisher.Config{Dialect: pg, WakeQueueLimit: 1.5, WakeQueueCheck: -time.Second}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "publisher: Config.WakeQueueLimit is 1.5: must be at most 1")
	require.ErrorContains(t, err, "publisher: Config.WakeQueueCheck is -1s: must not be negative")
	require.NoError(t, publisher.Config{Dialect: pg, WakeQueueLimit: -1}.Validate())
}
