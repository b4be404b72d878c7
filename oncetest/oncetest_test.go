package oncetest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/oncetest"
	"github.com/oncebox/watermill-oncebox/publisher"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// bundle is one test's database: a server connection (dbtest's) and a
// schema NewSchema made on it.
type bundle struct {
	env *dbtest.Env
	d   dialects.Dialect
}

// onServers runs fn as a parallel subtest on PostgreSQL and on MySQL/MariaDB,
// the servers NewSchema serves, with a connection to the server.
func onServers(t *testing.T, fn func(t *testing.T, tg dbtest.Target, env *dbtest.Env)) {
	t.Helper()
	for _, tg := range dbtest.Targets() {
		if tg.Name == "oracle" {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, tg, tg.NewEmpty(t))
		})
	}
}

// each runs fn on both servers, each time over a schema NewSchema made.
func each(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	onServers(t, func(t *testing.T, tg dbtest.Target, env *dbtest.Env) {
		fn(t, &bundle{env: env, d: oncetest.NewSchema(t, env.Beginner, tg.Name)})
	})
}

// publish writes msgs as events of eventType in tx.
func (b *bundle) publish(t *testing.T, tx wsql.ContextExecutor, eventType string, msgs ...*message.Message) {
	t.Helper()
	pub, err := publisher.NewPublisher(tx, publisher.Config{Dialect: b.d}, nil)
	require.NoError(t, err)
	require.NoError(t, pub.Publish(eventType, msgs...))
}

// begin opens a transaction on the test's server, rolled back at the end
// unless committed.
func (b *bundle) begin(t *testing.T) wsql.Tx {
	t.Helper()
	tx, err := b.env.DB.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	return wsql.TxFromStdSQL(tx)
}

func order(id string) *message.Message {
	msg := message.NewMessage("msg-"+id, []byte(`{"order_id":"`+id+`","total":12}`))
	msg.Metadata.Set("tenant", "acme")
	oncebox.SetKey(msg, id)
	return msg
}

func TestNewSchemaMigratesAFreshSchemaAndDropsItAtTheEnd(t *testing.T) {
	t.Parallel()
	onServers(t, func(t *testing.T, tg dbtest.Target, env *dbtest.Env) {
		var schema string
		t.Run("inner", func(t *testing.T) {
			d := oncetest.NewSchema(t, env.Beginner, tg.Name)
			schema, _, _ = strings.Cut(d.Tables().Events, ".")
			require.Regexp(t, `^oncetest_[0-9a-f]{12}$`, schema)
			for _, table := range []string{d.Tables().Events, d.Tables().Inbox, d.Tables().DLQ} {
				require.Zero(t, env.Count(t, table, ""), "%s exists and is empty", table)
			}
		})
		require.Zero(t, env.Count(t, "information_schema.schemata", "schema_name = "+env.P(1), schema),
			"the schema %s is dropped when the test that made it ends", schema)
	})
}

func TestNewSchemaRefusesADialectItCannotServe(t *testing.T) {
	t.Parallel()
	env := dbtest.Targets()[0].NewEmpty(t)
	msg := fails(t, func(tb testing.TB) { oncetest.NewSchema(tb, env.Beginner, "db2") })
	require.Equal(t, `oncetest: NewSchema: dialect "db2": want postgres or mysql (for oracle or sqlite, use a table prefix; see the doc)`, msg)
	msg = fails(t, func(tb testing.TB) { oncetest.NewSchema(tb, env.Beginner, "oracle") })
	require.Equal(t, `oncetest: NewSchema: dialect "oracle": want postgres or mysql (for oracle or sqlite, use a table prefix; see the doc)`, msg)
}

func TestRequireEventsSeesWhatTheTransactionPublished(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		tx := b.begin(t)
		b.publish(t, tx, "order-created", order("o-42"), order("o-43"))
		b.publish(t, tx, "order-paid", message.NewMessage("msg-p", []byte("not json")))

		oncetest.RequireEvents(t, tx, b.d, []oncetest.Expected{
			// JSON payloads compare as values: order and spacing differ.
			{Type: "order-created", Key: "o-42", Topic: "order-created", Payload: []byte(`{"total": 12, "order_id": "o-42"}`),
				Metadata: map[string]string{"tenant": "acme"}},
			{Type: "order-created", Key: "o-43"},
			{Type: "order-paid", Payload: []byte("not json")},
		})
		oncetest.RequireEvents(t, b.env.Beginner, b.d, nil) // uncommitted: the pool sees nothing

		events, err := oncetest.Events(context.Background(), tx, b.d)
		require.NoError(t, err)
		require.Len(t, events, 3)
		require.Equal(t, "msg-o-42", events[0].UUID)
		require.Equal(t, oncebox.StatusPending, events[0].Status)
		require.Equal(t, "order-created", events[0].Metadata[oncebox.HeaderEventType])
		require.Equal(t, events[0].ID.String(), events[0].Metadata[oncebox.HeaderEventID])
	})
}

func TestRequireEventsShowsWhatTheOutboxHoldsWhenEventsDiffer(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		tx := b.begin(t)
		b.publish(t, tx, "order-created", order("o-42"))
		events, err := oncetest.Events(context.Background(), tx, b.d)
		require.NoError(t, err)
		id := events[0].ID

		header := func(diff string, want string) string {
			return fmt.Sprintf("oncetest.RequireEvents: %s\nwant %s\nthe outbox %s holds 1 events:\n"+
				`  #0 type "order-created" topic "order-created" key "o-42" payload "{\"order_id\":\"o-42\",\"total\":12}" status PENDING metadata {tenant="acme"} id %s`+"\n",
				diff, want, b.d.Tables().Events, id)
		}
		for _, c := range []struct {
			want []oncetest.Expected
			diff string
			list string
		}{
			{[]oncetest.Expected{{Type: "order-created", Key: "o-43"}},
				`event #0: key is "o-42", want "o-43"`, "1 events:\n  #0 type \"order-created\" key \"o-43\""},
			{[]oncetest.Expected{{Type: "order-created", Payload: []byte(`{"order_id":"o-42","total":13}`)}},
				`event #0: payload is "{\"order_id\":\"o-42\",\"total\":12}", want "{\"order_id\":\"o-42\",\"total\":13}"`,
				"1 events:\n  #0 type \"order-created\" payload \"{\\\"order_id\\\":\\\"o-42\\\",\\\"total\\\":13}\""},
			{[]oncetest.Expected{{Type: "order-created", Metadata: map[string]string{"tenant": "globex"}}},
				`event #0: metadata "tenant" is "acme", want "globex"`, "1 events:\n  #0 type \"order-created\" metadata {tenant=\"globex\"}"},
			{[]oncetest.Expected{{Type: "order-shipped"}},
				`event #0: type is "order-created", want "order-shipped"`, "1 events:\n  #0 type \"order-shipped\""},
			{nil, "the outbox holds 1 events, want 0", "0 events:"},
			{[]oncetest.Expected{{Type: "order-created"}, {Type: "order-paid"}},
				"the outbox holds 1 events, want 2", "2 events:\n  #0 type \"order-created\"\n  #1 type \"order-paid\""},
		} {
			msg := fails(t, func(tb testing.TB) { oncetest.RequireEvents(tb, tx, b.d, c.want) })
			require.Equal(t, header(c.diff, c.list), msg)
		}
		require.Equal(t, `oncetest.RequireEvents: want[0].Type is empty: every expected event names its type`,
			fails(t, func(tb testing.TB) { oncetest.RequireEvents(tb, tx, b.d, []oncetest.Expected{{Key: "o-42"}}) }))
	})
}

func TestDrainDeliversTheCommittedEventsToTheTestsPublisher(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		ctx := context.Background()
		tx := b.begin(t)
		b.publish(t, tx, "order-created", order("o-42"), order("o-43"))
		b.publish(t, tx, "order-paid", order("o-42"))
		require.NoError(t, tx.Commit())

		broker := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 10}, watermill.NopLogger{})
		defer broker.Close()
		created, err := broker.Subscribe(ctx, "order-created")
		require.NoError(t, err)
		paid, err := broker.Subscribe(ctx, "order-paid")
		require.NoError(t, err)

		n, err := oncetest.Drain(ctx, b.env.Beginner, b.d, broker, "order-created")
		require.NoError(t, err)
		require.Equal(t, 2, n, "only the types asked for")
		// gochannel hands each message to its subscriber in a goroutine of
		// its own: the order it delivers in is not the relay's.
		var uuids []string
		for range 2 {
			msg := receive(t, created)
			uuids = append(uuids, msg.UUID)
			require.Equal(t, "msg-"+oncebox.Key(msg), msg.UUID, "the key travels with the message")
			require.Equal(t, "acme", msg.Metadata.Get("tenant"))
		}
		require.ElementsMatch(t, []string{"msg-o-42", "msg-o-43"}, uuids)

		n, err = oncetest.Drain(ctx, b.env.Beginner, b.d, broker)
		require.NoError(t, err)
		require.Equal(t, 1, n, "every type, when none is named")
		require.Equal(t, "order-paid", receive(t, paid).Metadata.Get(oncebox.HeaderEventType))

		events, err := oncetest.Events(ctx, b.env.Beginner, b.d)
		require.NoError(t, err)
		for _, e := range events {
			require.Equal(t, oncebox.StatusProcessed, e.Status, "event %s", e.ID)
		}
	})
}

func TestNewSchemaServesAnInbox(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b *bundle) {
		inbox, err := middleware.NewInbox(b.env.Beginner, middleware.InboxConfig{Dialect: b.d}, nil)
		require.NoError(t, err)
		handled := 0
		h := inbox.Middleware(func(msg *message.Message) ([]*message.Message, error) {
			handled++
			return nil, nil
		})
		msg := message.NewMessage("m-1", []byte("{}"))
		msg.Metadata.Set(oncebox.HeaderEventID, "0193c3a0-7c5e-7000-8000-000000000001")
		for range 2 {
			_, err := h(msg)
			require.NoError(t, err)
		}
		require.Equal(t, 1, handled, "the redelivery is dropped by the inbox table of the test's schema")
		require.Equal(t, 1, b.env.Count(t, b.d.Tables().Inbox, ""))
	})
}

func receive(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case msg := <-ch:
		msg.Ack()
		return msg
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
		return nil
	}
}

// fakeTB is a testing.TB that records the failure of a helper instead of
// failing the test; Fatalf ends the helper's goroutine, as testing's does.
type fakeTB struct {
	testing.TB
	cleanups []func()
	failure  string
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Cleanup(fn func())     { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(string, ...any) {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fails runs fn with a fakeTB and returns the failure it reported; the test
// fails if it reported none.
func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for _, c := range f.cleanups {
		c()
	}
	require.NotEmpty(t, f.failure, "the helper did not fail")
	return f.failure
}

func TestHelpersNameTheBadInput(t *testing.T) {
	t.Parallel()
	onServers(t, func(t *testing.T, tg dbtest.Target, env *dbtest.Env) {
		// env's tables were never migrated.
		msg := fails(t, func(tb testing.TB) { oncetest.RequireEvents(tb, env.Beginner, env.Dialect, nil) })
		require.Contains(t, msg, "oncetest.RequireEvents: oncetest: read the outbox "+env.Tables.Events+": ")
		require.Contains(t, fails(t, func(tb testing.TB) { oncetest.RequireEvents(tb, nil, env.Dialect, nil) }),
			"the handle or the dialect is nil")
		require.Equal(t, "oncetest: NewSchema: db is nil", fails(t, func(tb testing.TB) { oncetest.NewSchema(tb, nil, tg.Name) }))

		_, err := oncetest.Drain(context.Background(), env.Beginner, nil, gochannel.NewGoChannel(gochannel.Config{}, nil))
		require.ErrorIs(t, err, oncebox.ErrInvalidConfig)
		require.ErrorContains(t, err, "oncetest.Drain: the dialect is nil")
		_, err = oncetest.Drain(context.Background(), env.Beginner, env.Dialect, nil)
		require.ErrorContains(t, err, "publisherOut is nil")
	})
}
