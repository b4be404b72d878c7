package middleware_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// failsOnce is a handler that writes its effect in the inbox's transaction
// and then fails on its first run only, as a handler whose last step (a
// call, a commit of its own) fails once and then succeeds.
func failsOnce(t *testing.T, b *bundle) (*counter, message.HandlerFunc) {
	c := newCounter()
	c.fail = func(_ string, run int) error {
		if run == 1 {
			return errors.New("the last step failed once")
		}
		return nil
	}
	return c, c.handle(t, b)
}

func TestConsumerCommitsOneEffectWhereTheWrongOrderCommitsNone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	retry := oncebox.RetryConfig{MaxRetries: oncebox.Int(2), InitialInterval: time.Millisecond}

	// The wrong order, as a user writes it: the inbox outside Retry, with a
	// middleware between the two so that the inbox cannot see Retry when
	// the router builds the handler. Both attempts run in the inbox's one
	// transaction, which used to commit the effect of the failed attempt
	// with the effect of the good one (2 effect rows). The handler's
	// PgxTxFromContext finds Retry on its stack: the inbox rolls back and
	// refuses the message, which the poison queue parks.
	c, h := failsOnce(t, b)
	wrong := poison.Middleware(b.inbox(t).Middleware(passThrough(middleware.RetryPolicy(retry, nil).Middleware(h))))
	key := newKey(t)
	_, err = wrong(event(key))
	require.NoError(t, err, "parked")
	require.Equal(t, 2, c.count(key))
	require.Equal(t, 0, b.effects(t, key), "the wrong order commits no effect, not two")
	require.Equal(t, 0, b.recorded(t, key))
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, "event_id = $1 AND last_error LIKE '%Retry runs inside the inbox%'", key))

	// Retry right inside the inbox: the inbox sees it and refuses the
	// message, which the poison queue parks; the handler never runs.
	c, h = failsOnce(t, b)
	wrong = poison.Middleware(b.inbox(t).Middleware(middleware.RetryPolicy(retry, nil).Middleware(h)))
	key = newKey(t)
	_, err = wrong(event(key))
	require.NoError(t, err, "parked")
	require.Equal(t, 0, c.count(key))
	require.Equal(t, 0, b.effects(t, key))
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, "event_id = $1 AND last_error LIKE '%Retry runs inside the inbox%'", key))

	// The composed middleware: each attempt is its own transaction.
	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: poison, Inbox: b.inbox(t), Retry: retry}, nil)
	require.NoError(t, err)
	c, h = failsOnce(t, b)
	key = newKey(t)
	_, err = consumer.Middleware(h)(event(key))
	require.NoError(t, err)
	require.Equal(t, 2, c.count(key), "retried once")
	require.Equal(t, 1, b.effects(t, key), "one effect: the failed attempt rolled back")
	require.Equal(t, 1, b.recorded(t, key))
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, "event_id = $1", key), "nothing parked")

	// A redelivery is a duplicate; a handler that never succeeds is parked
	// after 1 + 2 attempts, none of whose effects remain.
	_, err = consumer.Middleware(h)(event(key))
	require.NoError(t, err)
	require.Equal(t, 2, c.count(key))
	always := newCounter()
	always.fail = func(string, int) error { return errors.New("bad order") }
	key = newKey(t)
	_, err = consumer.Middleware(always.handle(t, b))(event(key))
	require.NoError(t, err, "parked and acked")
	require.Equal(t, 3, always.count(key))
	require.Equal(t, 0, b.effects(t, key))
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, "event_id = $1", key))
}

func TestConsumerRefusesMissingPartsAndABadRetryPolicy(t *testing.T) {
	t.Parallel()
	_, err := middleware.NewConsumer(middleware.ConsumerConfig{
		Retry: oncebox.RetryConfig{InitialInterval: time.Second, MaxInterval: time.Millisecond, Multiplier: 0.5}}, nil)
	require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
	for _, want := range []string{"ConsumerConfig.PoisonQueue is nil", "ConsumerConfig.Inbox is nil",
		"inbox.retry.max-interval: 1ms is shorter than initial-interval 1s", "inbox.retry.multiplier: must be >= 1"} {
		require.ErrorContains(t, err, want)
	}
}

func TestRetryPolicyGrowsTheWait(t *testing.T) {
	t.Parallel()
	r := middleware.RetryPolicy(oncebox.RetryConfig{}, nil)
	require.Equal(t, wmw.Retry{MaxRetries: 3, InitialInterval: 100 * time.Millisecond, MaxInterval: 10 * time.Second, Multiplier: 2}, r)
}

// The inbox's own commit fails once (a deferred constraint trigger that
// raises on the first commit; a sequence counts, since it does not roll
// back). Through the consumer the failed commit is one more attempt: one
// effect. With the inbox outside Retry, Retry has returned before the
// commit, so nothing could retry it: the message is parked although a
// second try would have committed. (A middleware between the inbox and
// Retry hides Retry from the router-time check; the handler's
// PgxTxFromContext finds it, so the message is now refused before its
// commit, and parked all the same.)
func TestConsumerRetriesAFailedCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.schema.Name
	_, err := b.schema.Pool.Exec(context.Background(), `CREATE SEQUENCE `+s+`.commits;
CREATE FUNCTION `+s+`.fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('`+s+`.commits') = 1 THEN RAISE EXCEPTION 'the commit failed once'; END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER fail_first_commit AFTER INSERT ON `+s+`.effects
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+s+`.fail_first_commit()`)
	require.NoError(t, err)
	poison, err := middleware.NewPoisonQueue(b.schema.Beginner, middleware.PoisonConfig{Dialect: b.schema.Dialect}, nil)
	require.NoError(t, err)
	retry := oncebox.RetryConfig{MaxRetries: oncebox.Int(2), InitialInterval: time.Millisecond}
	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: poison, Inbox: b.inbox(t), Retry: retry}, nil)
	require.NoError(t, err)
	c := newCounter()
	key := newKey(t)
	_, err = consumer.Middleware(c.handle(t, b))(event(key))
	require.NoError(t, err)
	require.Equal(t, 2, c.count(key), "the failed commit was retried")
	require.Equal(t, 1, b.effects(t, key))
	require.Equal(t, 1, b.recorded(t, key))
	require.Equal(t, 0, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, ""))

	_, err = b.schema.Pool.Exec(context.Background(), `ALTER SEQUENCE `+s+`.commits RESTART`)
	require.NoError(t, err)
	wrong := poison.Middleware(b.inbox(t).Middleware(passThrough(middleware.RetryPolicy(retry, nil).Middleware(c.handle(t, b)))))
	key = newKey(t)
	_, err = wrong(event(key))
	require.NoError(t, err, "parked and acked")
	require.Equal(t, 1, c.count(key), "Retry never saw the commit fail")
	require.Equal(t, 0, b.effects(t, key))
	require.Equal(t, 1, b.schema.Count(t, b.schema.Dialect.Tables().DLQ, ""), "parked for an operator")
}

// passThrough is a middleware that does nothing, as a logger or a
// metrics middleware between the inbox and Retry would.
func passThrough(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) { return h(msg) }
}

// The check sees Retry the way a router composes it: the inbox added
// before Retry refuses the first message without running it, and stops
// (the later ones are held: TestInboxMisusedWithoutAPoisonQueueDoesNotSpin).
func TestInboxAddedBeforeRetryOnARouterRefusesTheFirstMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	router, pubSub := newRouter(t)
	logger := capture()
	in, err := middleware.NewInbox(b.schema.Beginner, middleware.InboxConfig{Dialect: b.schema.Dialect}, logger)
	require.NoError(t, err)
	var refused atomic.Int32
	router.AddMiddleware(func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			_, err := h(msg)
			if errors.Is(err, middleware.ErrRetryInsideInbox) {
				refused.Add(1)
			}
			return nil, nil // acked: the test looks at one delivery
		}
	}, in.Middleware, wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond}.Middleware)
	c := newCounter()
	router.AddConsumerHandler("h", "orders", pubSub, func(msg *message.Message) error { _, err := c.handle(t, b)(msg); return err })
	runRouter(t, router)
	key := newKey(t)
	require.NoError(t, pubSub.Publish("orders", event(key)))
	require.Eventually(t, func() bool { return refused.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 0, c.count(key), "the handler never ran")
	require.True(t, logged(logger, "built around Watermill's Retry"))

	// NonTransactional records the id before the handler: Retry inside it
	// is fine, and nothing is refused.
	nt := b.inbox(t, func(c *middleware.InboxConfig) { c.Mode = middleware.NonTransactional })
	_, err = nt.Middleware(wmw.Retry{MaxRetries: 1}.Middleware(c.handle(t, b)))(event(newKey(t)))
	require.NoError(t, err)
}
