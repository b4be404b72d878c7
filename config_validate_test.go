package oncebox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
)

// Every part of Config validates alone, naming the field by its YAML path;
// the zero value of each is valid (its fields take their defaults).
func TestConfigPartsValidateAlone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		zero     interface{ Validate() error }
		bad      interface{ Validate() error }
		wantPath string
	}{
		{"outbox", oncebox.OutboxConfig{}, oncebox.OutboxConfig{MaxPayloadSize: -1}, "outbox.max-payload-size"},
		{"inbox", oncebox.InboxConfig{}, oncebox.InboxConfig{CleanUp: oncebox.CleanUpConfig{TTL: time.Hour},
			Cache: oncebox.CacheConfig{TTL: 2 * time.Hour}}, "inbox.cache.ttl"},
		{"dlq", oncebox.DLQConfig{}, oncebox.DLQConfig{CleanUp: oncebox.CleanUpConfig{BatchSize: -1}}, "outbox.dlq.clean-up.batch-size"},
		{"cache", oncebox.CacheConfig{}, oncebox.CacheConfig{Enabled: true}, "inbox.cache.cache-name"},
		{"clean-up", oncebox.CleanUpConfig{}, oncebox.CleanUpConfig{TTL: -time.Second}, "clean-up.ttl"},
		{"sender", oncebox.SenderConfig{}, oncebox.SenderConfig{Type: "kafkaa"}, "outbox.sender.type"},
		{"source", oncebox.SourceConfig{}, oncebox.SourceConfig{Type: "sqs"}, "inbox.source.type"},
		{"event", mustEvent(t, "order-created"), func() oncebox.EventConfig {
			ec := mustEvent(t, "order-created")
			ec.BatchSize = 0
			return ec
		}(), "outbox.events.order-created.batch-size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.zero.Validate())
			err := c.bad.Validate()
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			var fe *oncebox.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.wantPath, fe.Field, "%v", err)
		})
	}
	require.NoError(t, oncebox.CacheConfig{TTL: 48 * time.Hour}.Validate(),
		"a cache ttl longer than the default inbox ttl is the whole config's to judge")
}

func mustEvent(t *testing.T, eventType string) oncebox.EventConfig {
	t.Helper()
	ec, err := oncebox.Config{}.WithDefaults().Event(eventType)
	require.NoError(t, err)
	return ec
}
