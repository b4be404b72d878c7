package poller_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/poller"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, poller.Config{}.Validate(), "poller: Config.Dialect is nil")
	pg, err := postgres.New(oncebox.TablesConfig{})
	require.NoError(t, err)
	require.NoError(t, poller.Config{Dialect: pg}.Validate())
	err = poller.Config{Dialect: pg, CloseTimeout: -1, JobBatchSize: -1}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "CloseTimeout must be > 0")
	require.ErrorContains(t, err, "JobBatchSize must be between 1")
}
