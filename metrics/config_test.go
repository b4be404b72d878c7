package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/metrics"
)

func TestBacklogConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	require.NoError(t, metrics.BacklogConfig{}.Validate())
	err := metrics.BacklogConfig{QueryTimeout: -1}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "BacklogConfig.QueryTimeout must not be negative")
	require.NotContains(t, err.Error(), "BacklogConfig.TTL")
}
