package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/service"
)

// The finding: tables.schema and tables.prefix were validated and read by
// no code, so a row published with a schema in the YAML landed wherever
// the dialect the user built by hand said. Through the service the YAML
// places the tables.
func TestTablesFromTheConfigurationPlaceTheRows(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		cfg := config(t, "  database: %s\n  tables: {schema: %s, prefix: billing_}\n", tg.Name, b.schema)
		svc := b.newService(t, cfg)
		want, err := dialects.NewTables(oncebox.TablesConfig{Schema: b.schema, Prefix: "billing_"})
		require.NoError(t, err)
		require.Equal(t, want, svc.Dialect().Tables())
		require.Equal(t, tg.Name, svc.Dialect().Name())
		require.NoError(t, svc.Migrate(context.Background()))

		tx := b.begin(t)
		pub, err := svc.Publisher(tx)
		require.NoError(t, err)
		msg := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
		require.NoError(t, pub.Publish("invoice-issued", msg))
		require.NoError(t, tx.Commit())
		require.Equal(t, 1, b.Count(t, want.Events, ""), "the row is in %s", want.Events)
		require.Equal(t, 0, b.Count(t, b.Tables.Events, ""), "nothing in the unprefixed %s", b.Tables.Events)
	})
}

func TestTheDatabaseComesFromTheDriverAndAMismatchIsAnError(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		svc := b.newService(t, config(t, "  tables: {schema: %s}\n", b.schema))
		require.Equal(t, tg.Name, svc.Dialect().Name(), "taken from the handle's driver")

		other := map[string]string{"postgres": "mysql", "mysql": "postgres", "oracle": "postgres"}[tg.Name]
		_, err := service.New(b.Beginner, config(t, "  database: %s\n", other), nil)
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
		require.ErrorContains(t, err, "config database: is \""+other+"\" but the database handle's driver")

		// A dialect given as an option must agree with tables.
		d, err := registry.New(tg.Name, oncebox.TablesConfig{Schema: b.schema, Prefix: "other_"})
		require.NoError(t, err)
		_, err = service.New(b.Beginner, config(t, "  tables: {schema: %s}\n", b.schema), nil, service.WithDialect(d))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
		require.ErrorContains(t, err, "config tables: the dialect of WithDialect places the outbox in "+b.schema+".other_outbox_events")
		_, err = service.New(b.Beginner, config(t, "  tables: {schema: %s, prefix: other_}\n", b.schema), nil, service.WithDialect(d))
		require.NoError(t, err, "the same placement is accepted")
	})
}

func TestConsumerMiddlewareCommitsOneEffectWhenAnAttemptFails(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
		e := b.effects(func(run int) error {
			if run == 1 {
				return errors.New("the last step failed once")
			}
			return nil
		})
		h := svc.Middleware(func(msg *message.Message) ([]*message.Message, error) { return nil, e.handle(msg) })
		msg, key := event(t)
		_, err := h(msg)
		require.NoError(t, err)
		_, err = h(msg.Copy())
		require.NoError(t, err)
		require.Equal(t, 2, e.runs[key], "one retry, then the duplicate skipped")
		require.Equal(t, 1, e.count(t, key), "one effect: the failed attempt rolled back")
		require.Equal(t, 0, b.Count(t, b.Tables.DLQ, ""))
	})
}

// The finding: a consumer-only service (the orders example's shipping)
// parked poison messages but ran nothing that retried them: after `dlq
// retry` the row stayed TO_RETRY. The service runs the DLQ retry and the
// relay sends the message back to its topic, where it is handled once.
func TestDLQRetryRunsInAConsumerOnlyService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
		var fixed atomic.Bool
		e := b.effects(func(int) error {
			if !fixed.Load() {
				return errors.New("cannot ship: the warehouse is unknown")
			}
			return nil
		})
		run(t, svc)
		b.router(t, svc, "orders", e.handle)
		msg, key := event(t)
		require.NoError(t, b.broker.Publish("orders", msg))
		require.Eventually(t, func() bool { return b.Count(t, b.Tables.DLQ, "") == 1 }, time.Minute, 10*time.Millisecond, "parked")
		require.Equal(t, 0, e.count(t, key))

		fixed.Store(true) // the operator fixed the cause, then: oncebox dlq retry
		n, err := svc.DLQStore().SetStatusWhere(context.Background(), dlqFilterConsumer(), oncebox.DLQStatusToRetry)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		b.eventually(t, "the retried message handled", time.Minute, func() bool { return e.count(t, key) == 1 })
		require.Equal(t, 0, b.Count(t, b.Tables.DLQ, ""), "the row left the DLQ")
		dbtest.Never(t, func() bool { return e.count(t, key) > 1 }, 200*time.Millisecond, "handled twice")
	})
}

func TestInboxCacheFromTheConfiguration(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		yaml := consumerYAML + "    cache: {enabled: true, cache-name: shipping, ttl: 30m, size: 10}\n"
		hooks := &inboxHooks{}
		svc := b.newService(t, config(t, yaml, b.schema), service.WithRelay(b.broker), service.WithHooks(service.Hooks{Inbox: hooks}))
		h := svc.Middleware(func(msg *message.Message) ([]*message.Message, error) { return nil, b.effects(nil).handle(msg) })
		msg, _ := event(t)
		for range 2 {
			_, err := h(msg.Copy())
			require.NoError(t, err)
		}
		require.Equal(t, 1, hooks.cached, "the second delivery was answered by the in-process cache")

		// A cache of the caller's (Redis) is built from the same keys.
		var got oncebox.CacheConfig
		mem, err := cache.NewMemory(10, time.Minute)
		require.NoError(t, err)
		b.newService(t, config(t, yaml, b.schema), service.WithRelay(b.broker),
			service.WithInboxCache(func(c oncebox.CacheConfig) (cache.Cache, error) { got = c; return mem, nil }))
		require.Equal(t, oncebox.CacheConfig{Enabled: true, CacheName: "shipping", TTL: 30 * time.Minute, Size: 10}, got)

		_, err = service.New(b.Beginner, config(t, consumerYAML, b.schema), nil, service.WithRelay(b.broker),
			service.WithInboxCache(func(oncebox.CacheConfig) (cache.Cache, error) { return mem, nil }))
		require.ErrorContains(t, err, "WithInboxCache: inbox.cache.enabled is false")
	})
}

func TestInboxCleanUpRunsFromTheConfiguration(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		yaml := consumerYAML + "    clean-up: {ttl: 2h, batch-size: 5}\n"
		runs := make(chan middleware.JobResult, 100)
		svc := b.newService(t, config(t, yaml, b.schema), service.WithRelay(b.broker),
			service.WithHooks(service.Hooks{OnInboxCleanUp: func(r middleware.JobResult) {
				select {
				case runs <- r:
				default:
				}
			}}))
		h := svc.Middleware(func(msg *message.Message) ([]*message.Message, error) { return nil, b.effects(nil).handle(msg) })
		for range 7 {
			msg, _ := event(t)
			_, err := h(msg)
			require.NoError(t, err)
		}
		require.Equal(t, 7, b.Count(t, b.Tables.Inbox, ""))
		run(t, svc)
		// Within the ttl nothing goes; past it every id goes, five a statement.
		// (Not require.Never: its condition goroutine can outlive the test
		// and query a schema its clean-up already dropped.)
		// The cleaner's Running is closed before its first wait is on the
		// fake clock: one Advance of an hour could come before that wait and
		// be missed (seen under load on MariaDB). Step the clock, at most 90
		// minutes, well within the 2h ttl.
		var first *middleware.JobResult
		for range 90 {
			b.clock.Advance(time.Minute)
			select {
			case r := <-runs:
				first = &r
			case <-time.After(200 * time.Millisecond):
			}
			if first != nil {
				break
			}
		}
		require.NotNil(t, first, "no inbox clean-up ran within the ttl")
		require.Zero(t, first.Rows, "a clean-up within the ttl deletes nothing")
		require.Equal(t, 7, b.Count(t, b.Tables.Inbox, ""))
		b.eventually(t, "the ids older than inbox.clean-up.ttl deleted", 5*time.Minute,
			func() bool { return b.Count(t, b.Tables.Inbox, "") == 0 })
		require.Eventually(t, func() bool { return len(runs) > 0 }, time.Minute, 10*time.Millisecond, "OnInboxCleanUp told")
	})
}

// inboxHooks counts the cache's answers.
type inboxHooks struct {
	middleware.NopInboxHooks
	cached int
}

func (h *inboxHooks) Duplicate(_ string, cached bool) {
	if cached {
		h.cached++
	}
}

// outbox.partitions in the configuration partitions the outbox at
// Migrate (PostgreSQL: the table the relay's clean-up job then maintains);
// on a database that cannot partition, New refuses it, naming the setting.
func TestPartitionsFromTheConfigurationPartitionTheOutbox(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		cfg := config(t, "  tables: {schema: %s, prefix: part_}\n  outbox: {partitions: {interval: 1h}}\n", b.schema)
		if tg.Name != "postgres" {
			_, err := service.New(b.Beginner, cfg, nil)
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
			require.ErrorContains(t, err, "outbox.partitions: the "+tg.Name+" dialect cannot partition the outbox table")
			return
		}
		svc := b.newService(t, cfg)
		require.NoError(t, svc.Migrate(context.Background()))
		var kind string
		require.NoError(t, b.DB.QueryRowContext(context.Background(),
			"SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", svc.Dialect().Tables().Events).Scan(&kind))
		require.Equal(t, "p", kind, "the outbox table is partitioned")
	})
}

// outbox.finalize: delete in the configuration reaches the service's
// relay: the events are sent and their rows are gone, none left PROCESSED.
func TestFinalizeDeleteFromTheConfiguration(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		cfg := config(t, relayYAML+"    finalize: delete\n", b.schema)
		require.Equal(t, oncebox.FinalizeDelete, cfg.Outbox.Finalize)
		broker := newBroker(t, true)
		msgs, err := broker.Subscribe(t.Context(), "order-created")
		require.NoError(t, err)
		svc, err := service.New(b.Beginner, cfg, watermill.NopLogger{}, service.WithRelay(broker))
		require.NoError(t, err)
		run(t, svc)

		tx := b.begin(t)
		pub, err := svc.Publisher(tx)
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), []byte(`{}`))))
		}
		require.NoError(t, tx.Commit())
		for range 3 {
			select {
			case m := <-msgs:
				m.Ack()
			case <-time.After(30 * time.Second):
				t.Fatal("the events were not relayed")
			}
		}
		require.Eventually(t, func() bool { return b.Count(t, b.Tables.Events, "") == 0 }, 10*time.Second, 10*time.Millisecond,
			"the confirmed rows deleted, none left PROCESSED")
	})
}
