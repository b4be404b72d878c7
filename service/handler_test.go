package service_test

import (
	"context"
	stdsql "database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/service"
)

// txStep is one run of a typed handler, whichever its transaction's kind:
// exec writes the effect, publisher is the outbox over the transaction,
// kill ends the transaction's database session from another connection,
// as a crash of the consumer's host would.
type txStep struct {
	exec      func(query string, args ...any) error
	publisher func() (*publisher.Publisher, error)
	kill      func() error
}

// addTyped adds a typed handler of the target's kind (AddPgxHandler on
// PostgreSQL, AddStdHandler on MySQL/MariaDB) that calls step.
func (b *bundle) addTyped(t *testing.T, svc *service.Service, r *message.Router, name, topic string,
	step func(ctx context.Context, tx txStep, msg *message.Message) error) (*message.Handler, error) {
	t.Helper()
	if b.Target.Name == "postgres" {
		return svc.AddPgxHandler(r, name, topic, b.broker, func(ctx context.Context, tx pgx.Tx, msg *message.Message) error {
			return step(ctx, txStep{
				exec:      func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err },
				publisher: func() (*publisher.Publisher, error) { return svc.PgxPublisher(tx) },
				kill: func() error {
					var pid int
					if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
						return err
					}
					// The timeout makes pg_terminate_backend wait until the backend is gone.
					_, err := b.DB.ExecContext(ctx, "SELECT pg_terminate_backend($1, 10000)", pid)
					return err
				},
			}, msg)
		})
	}
	return svc.AddStdHandler(r, name, topic, b.broker, func(ctx context.Context, tx *stdsql.Tx, msg *message.Message) error {
		return step(ctx, txStep{
			exec:      func(q string, args ...any) error { _, err := tx.ExecContext(ctx, q, args...); return err },
			publisher: func() (*publisher.Publisher, error) { return svc.StdPublisher(tx) },
			kill: func() error {
				var id int64
				if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
					return err
				}
				if _, err := b.DB.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
					return err
				}
				// KILL only flags the session: wait until it is gone.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					var n int
					if err := b.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
						return err
					}
					if n == 0 {
						return nil
					}
				}
				return fmt.Errorf("connection %d still there 10s after KILL", id)
			},
		}, msg)
	})
}

// handlerOf is the function the router runs for the handler name (without
// the router's middlewares): the test calls it as the router would.
func handlerOf(t *testing.T, r *message.Router, name string) func(*message.Message) error {
	h, ok := r.Handlers()[name]
	require.True(t, ok, "the router has %q", name)
	return func(msg *message.Message) error { _, err := h(msg); return err }
}

// consume -> effect -> publish in the handler's transaction, then the
// consumer dies before the commit: neither the effect nor the new event is
// there; the redelivery commits both once, and a duplicate adds nothing.
func TestATypedHandlerKilledBeforeItsCommitLeavesNothingThenCommitsOnce(t *testing.T) {
	t.Parallel()
	for _, death := range []string{"panic", "connection killed"} {
		t.Run(death, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
				b := setup(t, tg)
				svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
				r := newRouter(t)
				var (
					mu                  sync.Mutex
					runs                int
					effectsAtRedelivery = -1
					eventsAtRedelivery  = -1
				)
				_, err := b.addTyped(t, svc, r, "ship-order", "order-placed", func(ctx context.Context, tx txStep, msg *message.Message) error {
					mu.Lock()
					runs++
					run := runs
					mu.Unlock()
					if run == 2 {
						// What the first run left behind, seen from outside its transaction.
						effectsAtRedelivery = b.Count(t, b.schema+".effects", "")
						eventsAtRedelivery = b.Count(t, b.Tables.Events, "")
					}
					if err := tx.exec("INSERT INTO "+b.schema+".effects VALUES ("+b.P(1)+")", msg.Metadata.Get(oncebox.HeaderEventID)); err != nil {
						return err
					}
					pub, err := tx.publisher()
					if err != nil {
						return err
					}
					if err := pub.Publish("order-shipped", message.NewMessage(watermill.NewUUID(), []byte(`{"order":1}`))); err != nil {
						return err
					}
					if run == 1 {
						if death == "panic" {
							panic("the consumer dies after the effect and the publish")
						}
						require.NoError(t, tx.kill())
					}
					return nil
				})
				require.NoError(t, err)
				handle := handlerOf(t, r, "ship-order")

				msg, key := event(t)
				require.NoError(t, handle(msg), "the retry (inbox.retry) redelivers it to the handler")
				require.Equal(t, 2, runs)
				require.Equal(t, 0, effectsAtRedelivery, "the first run's effect rolled back")
				require.Equal(t, 0, eventsAtRedelivery, "the first run's event rolled back")
				require.Equal(t, 1, b.Count(t, b.schema+".effects", "event_id = "+b.P(1), key), "the effect once")
				require.Equal(t, 1, b.Count(t, b.Tables.Events, "event_type = "+b.P(1), "order-shipped"), "the new event once")
				require.Equal(t, 1, b.Count(t, b.Tables.Inbox, "event_id = "+b.P(1), key), "recorded once")

				require.NoError(t, handle(msg.Copy()), "a duplicate delivery")
				require.Equal(t, 2, runs, "the duplicate is not handled")
				require.Equal(t, 1, b.Count(t, b.schema+".effects", ""))
				require.Equal(t, 1, b.Count(t, b.Tables.Events, ""))
				require.Equal(t, 0, b.Count(t, b.Tables.DLQ, ""))
			})
		})
	}
}

// A typed handler through a running router, with no router middleware at
// all, and with router.AddMiddleware(svc.Middleware) added before or after
// it (the README's wiring before typed handlers): each message is handled
// and recorded once. Before, the second inbox recorded the message again in
// a transaction of its own and waited for the first one's row lock, held
// until the handler returned: the message hung.
func TestATypedHandlerRunsOnceWithOrWithoutTheRouterMiddleware(t *testing.T) {
	t.Parallel()
	for _, wiring := range []string{"none", "router middleware added before", "router middleware added after"} {
		t.Run(wiring, func(t *testing.T) {
			t.Parallel()
			dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
				b := setup(t, tg)
				svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
				r := newRouter(t)
				if wiring == "router middleware added before" {
					r.AddMiddleware(svc.Middleware)
				}
				done := make(chan string, 10)
				_, err := b.addTyped(t, svc, r, "ship-order", "order-placed", func(ctx context.Context, tx txStep, msg *message.Message) error {
					if err := tx.exec("INSERT INTO "+b.schema+".effects VALUES ("+b.P(1)+")", msg.Metadata.Get(oncebox.HeaderEventID)); err != nil {
						return err
					}
					done <- msg.UUID
					return nil
				})
				require.NoError(t, err)
				if wiring == "router middleware added after" {
					r.AddMiddleware(svc.Middleware)
				}
				runRouter(t, r)

				msg, key := event(t)
				require.NoError(t, b.broker.Publish("order-placed", msg))
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the message was not handled")
				}
				require.Eventually(t, func() bool { return b.Count(t, b.Tables.Inbox, "event_id = "+b.P(1), key) == 1 },
					20*time.Second, 10*time.Millisecond, "recorded")
				require.NoError(t, b.broker.Publish("order-placed", msg.Copy()))
				dbtest.Never(t, func() bool { return len(done) > 0 }, 200*time.Millisecond, "the duplicate handled")
				require.Equal(t, 1, b.Count(t, b.schema+".effects", "event_id = "+b.P(1), key))
				require.Equal(t, 1, b.Count(t, b.Tables.Inbox, ""))
			})
		})
	}
}

// runRouter runs r until the test ends and waits until it runs.
func runRouter(t *testing.T, r *message.Router) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-errc)
	})
	select {
	case <-r.Running():
	case err := <-errc:
		t.Fatalf("the router stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the router did not start")
	}
}

// Whatever cannot work is refused when the handler is added, with an error
// that names it, before a message is consumed; nothing panics.
func TestAddingATypedHandlerRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, tg dbtest.Target) {
		b := setup(t, tg)
		svc := b.newService(t, config(t, consumerYAML, b.schema), service.WithRelay(b.broker))
		pgxH := func(context.Context, pgx.Tx, *message.Message) error { return nil }
		stdH := func(context.Context, *stdsql.Tx, *message.Message) error { return nil }
		add := func(s *service.Service, r *message.Router, name, topic string, sub message.Subscriber, nilHandler bool) error {
			var err error
			if tg.Name == "postgres" {
				h := pgxH
				if nilHandler {
					h = nil
				}
				_, err = s.AddPgxHandler(r, name, topic, sub, h)
			} else {
				h := stdH
				if nilHandler {
					h = nil
				}
				_, err = s.AddStdHandler(r, name, topic, sub, h)
			}
			return err
		}
		r := newRouter(t)

		err := add(svc, nil, "", "", nil, true)
		require.ErrorContains(t, err, "the router is nil\nthe name is empty\nthe topic is empty\nthe subscriber is nil\nthe handler is nil")

		off := b.newService(t, config(t, "  tables: {schema: %s}\n", b.schema))
		err = add(off, r, "ship-order", "order-placed", b.broker, false)
		require.ErrorIs(t, err, service.ErrConsumerOff)
		require.ErrorContains(t, err, `"ship-order"`)

		require.NoError(t, add(svc, r, "ship-order", "order-placed", b.broker, false))
		err = add(svc, r, "ship-order", "order-paid", b.broker, false)
		require.EqualError(t, err, fmt.Sprintf(`oncebox: service: %s "ship-order": the router already has a handler of that name`,
			map[string]string{"postgres": "AddPgxHandler", "mysql": "AddStdHandler"}[tg.Name]))

		// The other kind of transaction than the handle's.
		if tg.Name == "postgres" {
			_, err = svc.AddStdHandler(r, "bill-order", "order-placed", b.broker, stdH)
			require.ErrorContains(t, err, `AddStdHandler "bill-order": the service's database handle is a pgx pool (sql.BeginnerFromPgx), whose transactions are pgx.Tx: use AddPgxHandler`)
		} else {
			_, err = svc.AddPgxHandler(r, "bill-order", "order-placed", b.broker, pgxH)
			require.ErrorContains(t, err, `AddPgxHandler "bill-order": the service's database handle is a *sql.DB (sql.BeginnerFromStdSQL), whose transactions are *sql.Tx: use AddStdHandler`)
		}
		require.Len(t, r.Handlers(), 1, "nothing refused was added")

		_, err = svc.PgxPublisher(nil)
		require.EqualError(t, err, "oncebox: service: PgxPublisher: tx is nil")
		_, err = svc.StdPublisher(nil)
		require.EqualError(t, err, "oncebox: service: StdPublisher: tx is nil")
	})
}

// A handler whose transaction cannot be given is never called: an inbox
// without transactions (InboxConfig.Mode NonTransactional) is refused when
// the handler is added (at the first message it would be recorded, then
// lost); a handle of the other kind that a wrapper hid from AddStdHandler
// stops Run with ErrNoInboxTx at the first message.
func TestATypedHandlerWithoutItsTransactionStopsTheService(t *testing.T) {
	for _, c := range []struct {
		name, want string
		nonTx      bool
	}{
		{"NonTransactional", `AddStdHandler "ship-order": the inbox runs without a transaction (InboxConfig.Mode NonTransactional)`, true},
		{"pgx behind a wrapper", `AddStdHandler "ship-order": the inbox's transaction is a *sql.PgxTx, not database/sql's: use AddPgxHandler`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, dbtest.Targets()[0])
			r := newRouter(t)
			var ic middleware.InboxConfig
			if c.nonTx {
				ic.Mode = middleware.NonTransactional
			}
			svc, err := service.New(foreignBeginner{b.Beginner}, config(t, "  database: postgres\n"+consumerYAML, b.schema),
				watermill.NopLogger{}, service.WithClock(b.clock), service.WithRelay(b.broker), service.WithRouter(r), service.WithInboxConfig(ic))
			require.NoError(t, err)
			called := make(chan struct{}, 10)
			_, err = svc.AddStdHandler(r, "ship-order", "order-placed", b.broker, func(context.Context, *stdsql.Tx, *message.Message) error {
				called <- struct{}{}
				return nil
			})
			if c.nonTx {
				// Refused when the handler is added, before a message is
				// recorded and lost.
				require.ErrorContains(t, err, "the inbox is NonTransactional")
				return
			}
			require.NoError(t, err, "the wrapper hides the handle's kind until a message")
			errc := runAsync(context.Background(), svc)
			<-r.Running()
			msg, _ := event(t)
			require.NoError(t, b.broker.Publish("order-placed", msg))
			err = returned(t, errc)
			require.ErrorIs(t, err, service.ErrNoInboxTx)
			require.ErrorContains(t, err, c.want)
			require.Empty(t, called)
		})
	}
}
