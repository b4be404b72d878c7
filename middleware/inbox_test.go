package middleware_test

import (
	"context"
	"errors"
	"testing"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
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
	in, err := middleware.NewInbox(b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect,
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
	in, err := middleware.NewInbox(wsqlStd(t, b), middleware.InboxConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	key := newKey(t)
	h := in.Middleware(func(msg *message.Message) ([]*message.Message, error) {
		tx, ok := middleware.StdTxFromContext(msg.Context())
		require.True(t, ok)
		_, ok = middleware.PgxTxFromContext(msg.Context())
		require.False(t, ok, "not a pgx transaction")
		_, err := tx.ExecContext(msg.Context(), "INSERT INTO "+b.schema.Name+".effects VALUES ($1, 'std')", key)
		return nil, err
	})
	_, err = h(event(key))
	require.NoError(t, err)
	require.Equal(t, 1, b.effects(t, key))
	_, ok := middleware.TxFromContext(context.Background())
	require.False(t, ok)
}

func TestNewInboxValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := map[string]struct {
		db  wsql.Beginner
		cfg middleware.InboxConfig
	}{
		"inbox: db is nil":           {nil, middleware.InboxConfig{Dialect: b.schema.Dialect}},
		"InboxConfig.Dialect is nil": {b.schema.Beginner, middleware.InboxConfig{}},
		"neither Transactional":      {b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect, Mode: 7}},
		"HandlerNamespaces[\"ship\"] must be valid UTF-8": {b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect,
			HandlerNamespaces: map[string]string{"ship": "bad\xff"}}},
	}
	for want, c := range cases {
		_, err := middleware.NewInbox(c.db, c.cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, want)
		require.ErrorContains(t, err, want)
	}
}
