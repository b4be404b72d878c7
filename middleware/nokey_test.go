package middleware_test

import (
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// KeyEventIDOrUUID keys an oncebox event by its event id and a
// forwarder-era message (no oncebox_event_id) by its message UUID: both are
// deduplicated, neither is refused.
func TestKeyEventIDOrUUIDTakesForwarderMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	h := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Key = middleware.KeyEventIDOrUUID }).Middleware(c.handle(t, b))

	legacy := message.NewMessage(watermill.NewUUID(), []byte("forwarded"))
	for range 2 { // the message and its redelivery
		_, err := h(legacy.Copy())
		require.NoError(t, err)
	}
	require.Equal(t, 1, c.count(""), "the forwarder's message handled once")
	require.Equal(t, 1, b.recorded(t, legacy.UUID), "keyed by its message UUID")

	key := newKey(t)
	for range 2 { // two message UUIDs, one event id: the event id decides
		_, err := h(event(key))
		require.NoError(t, err)
	}
	require.Equal(t, 1, c.count(key))
	require.Equal(t, 1, b.recorded(t, key))
	require.Equal(t, "", middleware.KeyEventIDOrUUID(message.NewMessage("", nil)), "no id at all: no key")
}

// Two different messages without an event id under one message UUID (or
// whose UUIDs share their first 255 bytes) are parked in two DLQ rows, each
// with its payload; a redelivery of either counts one more attempt on its
// own row.
func TestPoisonQueueKeepsApartPayloadsUnderOneMessageUUID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		t.Parallel()
		env := tg.New(t)
		poison, err := middleware.NewPoisonQueue(env.Beginner, middleware.PoisonConfig{Dialect: env.Dialect}, capture())
		require.NoError(t, err)
		h := poison.Middleware(func(*message.Message) ([]*message.Message, error) {
			return nil, errors.New("cannot parse")
		})
		long := string(make([]byte, 0, 300))
		for range 300 {
			long += "u"
		}
		for _, uuid := range []string{watermill.NewUUID(), long} {
			first := message.NewMessage(uuid, []byte("first payload"))
			other := message.NewMessage(uuid+"-tail", []byte("another payload")) // the same first 255 bytes for long
			if len(uuid) < 255 {
				other.UUID = uuid
			}
			for _, m := range []*message.Message{first, other, first.Copy(), other.Copy()} {
				_, err := h(m)
				require.NoError(t, err, "parked and acked")
			}
			stored := uuid
			if len(stored) > 200 { // the row kept apart holds the first 239 bytes and a digest
				stored = stored[:200]
			}
			like := "message_uuid LIKE " + env.P(1)
			require.Equal(t, 2, env.Count(t, env.Tables.DLQ, like, stored+"%"), "%.20s: two messages, two rows", uuid)
			for _, p := range []string{"first payload", "another payload"} {
				require.Equal(t, 1, env.Count(t, env.Tables.DLQ, like+" AND retry_count = 2 AND payload = "+env.P(2), stored+"%", []byte(p)),
					"%.20s: %q kept, its redelivery counted on its row", uuid, p)
			}
		}
	})
}
