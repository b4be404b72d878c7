package rabbitmq_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/rabbitmq"
)

func TestPublisherConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	err := rabbitmq.PublisherConfig{Channels: -1}.Validate()
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	require.ErrorContains(t, err, "URL is required")
	require.ErrorContains(t, err, "Channels must be > 0")
	require.NoError(t, rabbitmq.PublisherConfig{URL: "amqp://guest:guest@127.0.0.1:5672/"}.Validate())
}
