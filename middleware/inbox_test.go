package middleware_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestNonTransactionalIsAtMostOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	c.fail = func(string, int) error { return errors.New("smtp 451") }
	logger := capture()
	in, err := middleware.NewInbox(middleware.InboxConfig{DB: b.schema.Beginner, Dialect: b.schema.Dialect,
		Mode: middleware.NonTransactional}, logger)
	require.NoError(t, err)
	h := in.Middleware(c.handle(t, b))
	key := newKey(t)

	_, err = h(event(key))
	require.EqualError(t, err, "smtp 451")
	require.Equal(t, 1, b.recorded(t, key), "the id was committed before the handler ran")
	require.True(t, logged(logger, "redeliveries will be skipped"))

	_, err = h(event(key))
	require.NoError(t, err, "the redelivery is skipped and acked")
	require.Equal(t, 1, c.count(key), "at most once")
	require.Equal(t, 0, b.effects(t, key), "no transaction is given to the handler")
}

func TestStdSQLTransactionIsReachable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.DB = wsqlStd(t, b) })
	key := newKey(t)
	h := in.Middleware(func(msg *message.Message) ([]*message.Message, error) {
		tx, ok := middleware.StdTxFromContext(msg.Context())
		require.True(t, ok)
		_, ok = middleware.PgxTxFromContext(msg.Context())
		require.False(t, ok, "not a pgx transaction")
		_, err := tx.ExecContext(msg.Context(), "INSERT INTO "+b.schema.Name+".effects VALUES ($1, 'std')", key)
		return nil, err
	})
	_, err := h(event(key))
	require.NoError(t, err)
	require.Equal(t, 1, b.effects(t, key))
	_, ok := middleware.TxFromContext(context.Background())
	require.False(t, ok)
}

func TestNewInboxValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := map[string]middleware.InboxConfig{
		"InboxConfig.DB is nil":      {Dialect: b.schema.Dialect},
		"InboxConfig.Dialect is nil": {DB: b.schema.Beginner},
		"neither Transactional":      {DB: b.schema.Beginner, Dialect: b.schema.Dialect, Mode: 7},
		"HandlerNamespaces[\"ship\"] must be valid UTF-8": {DB: b.schema.Beginner, Dialect: b.schema.Dialect,
			HandlerNamespaces: map[string]string{"ship": "bad\xff"}},
	}
	for want, cfg := range cases {
		_, err := middleware.NewInbox(cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, want)
		require.ErrorContains(t, err, want)
	}
}
