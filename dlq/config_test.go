package dlq_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dlq"
)

func TestConfigsValidateNamingTheField(t *testing.T) {
	t.Parallel()
	err := dlq.Config{}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "Config.Dialect is nil")
	err = dlq.HandlerConfig{BasePath: "dlq"}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "HandlerConfig.Store is nil")
	require.ErrorContains(t, err, "HandlerConfig.Authorize is nil")
	require.ErrorContains(t, err, "HandlerConfig.BasePath")
}
