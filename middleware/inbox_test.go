package middleware_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestDuplicateDeliveryIsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	h := b.inbox(t).Middleware(c.handle(t, b))
	key := newKey(t)
	for range 3 {
		_, err := h(event(key))
		require.NoError(t, err)
	}
	require.Equal(t, 1, c.count(key))
	require.Equal(t, 1, b.effects(t, key))
	require.Equal(t, 1, b.recorded(t, key))
}

func TestFailedHandlerRollsBackTheIDAndItsWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	c.fail = func(_ string, run int) error {
		if run == 1 {
			return errors.New("downstream timeout")
		}
		return nil
	}
	h := b.inbox(t).Middleware(c.handle(t, b))
	key := newKey(t)

	_, err := h(event(key))
	require.EqualError(t, err, "downstream timeout", "the error nacks the message")
	require.Equal(t, 0, b.recorded(t, key), "the id rolled back")
	require.Equal(t, 0, b.effects(t, key), "the handler's write rolled back with it")

	_, err = h(event(key)) // the redelivery runs again
	require.NoError(t, err)
	_, err = h(event(key)) // and a later duplicate is skipped
	require.NoError(t, err)
	require.Equal(t, 2, c.count(key))
	require.Equal(t, 1, b.effects(t, key), "effectively once")
	require.Equal(t, 1, b.recorded(t, key))
}

func TestHandlerPanicRollsBackAndNacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := b.inbox(t).Middleware(func(*message.Message) ([]*message.Message, error) { panic("boom") })
	key := newKey(t)
	_, err := h(event(key))
	require.ErrorContains(t, err, "handler panicked: boom")
	require.Equal(t, 0, b.recorded(t, key))
}

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

func TestConcurrentDuplicatesOnTwoInstancesRunTheHandlerOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := pgtest.NewSchema(t) // a second pool: a second instance
	c := newCounter()
	c.fail = func(string, int) error {
		time.Sleep(20 * time.Millisecond) // hold the transaction open
		return nil
	}
	instances := []message.HandlerFunc{
		b.inbox(t).Middleware(c.handle(t, b)),
		b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.DB = other.Beginner }).Middleware(c.handle(t, b)),
	}
	for round := range 10 {
		key := newKey(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, len(instances))
		for i, h := range instances {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = h(event(key))
			}()
		}
		close(start)
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "round %d", round)
		require.Equal(t, 1, c.count(key), "round %d: exactly one handler ran", round)
		require.Equal(t, 1, b.effects(t, key))
	}
}

func TestMissingKeyGoesToThePoisonPathByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	h := b.inbox(t).Middleware(c.handle(t, b))
	for _, key := range []string{"", string(make([]byte, 300)), "bad\xff"} {
		_, err := h(event(key))
		require.ErrorIs(t, err, oncebox.ErrMissingEventID, "%q", key)
	}
	require.Equal(t, 0, c.count(""))

	// Opted in: handled without dedup, still in a transaction.
	h = b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.AllowMissingKey = true }).Middleware(c.handle(t, b))
	_, err := h(event(""))
	require.NoError(t, err)
	_, err = h(event(""))
	require.NoError(t, err)
	require.Equal(t, 2, c.count(""))
	require.Equal(t, 2, b.effects(t, ""))
}

func TestKeyFromUUIDAndNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := newCounter()
	byUUID := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Key = middleware.KeyFromUUID() }).Middleware(c.handle(t, b))
	msg := event("ignored")
	_, err := byUUID(msg)
	require.NoError(t, err)
	_, err = byUUID(msg.Copy())
	require.NoError(t, err)
	require.Equal(t, 1, c.count("ignored"))
	require.Equal(t, 1, b.recorded(t, msg.UUID))

	// Two namespaces each handle the event once.
	key := newKey(t)
	for _, ns := range []string{"billing", "shipping", "billing"} {
		h := b.inbox(t, func(cfg *middleware.InboxConfig) { cfg.Namespace = ns }).Middleware(c.handle(t, b))
		_, err := h(event(key))
		require.NoError(t, err)
	}
	require.Equal(t, 2, c.count(key))
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
		"are exclusive":              {DB: b.schema.Beginner, Dialect: b.schema.Dialect, Namespace: "x", NamespaceByHandler: true},
	}
	for want, cfg := range cases {
		_, err := middleware.NewInbox(cfg, nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig, want)
		require.ErrorContains(t, err, want)
	}
}
