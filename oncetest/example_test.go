package oncetest_test

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/oncetest"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// Events reads what a transaction published, before it commits; Drain
// relays the committed events into any Watermill publisher, here an
// in-memory channel, with no broker and no relay running. In a test,
// oncetest.NewSchema gives the tables and RequireEvents asserts on them.
func ExampleDrain() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS example_oncetest CASCADE; CREATE SCHEMA example_oncetest")
	defer pool.Exec(ctx, "DROP SCHEMA example_oncetest CASCADE") //nolint:errcheck
	db := wsql.BeginnerFromPgx(pool)
	pg, _ := postgres.New(oncebox.TablesConfig{Schema: "example_oncetest"})
	if err := migrate.Migrate(ctx, db, pg); err != nil {
		panic(err)
	}

	// The code under test publishes in its transaction.
	tx, _ := pool.Begin(ctx)
	pub, _ := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: pg}, nil)
	msg := message.NewMessage("msg-1", []byte(`{"order_id":"o-42"}`))
	oncebox.SetKey(msg, "o-42")
	if err := pub.Publish("order-created", msg); err != nil {
		panic(err)
	}
	events, _ := oncetest.Events(ctx, wsql.TxFromPgx(tx), pg)
	fmt.Println("in the transaction:", events[0].Type, events[0].Key, string(events[0].Payload), events[0].Status)
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	broker := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1}, watermill.NopLogger{})
	defer broker.Close()
	orders, _ := broker.Subscribe(ctx, "order-created")
	sent, err := oncetest.Drain(ctx, db, pg, broker)
	fmt.Println("drained:", sent, err)
	got := <-orders
	got.Ack()
	fmt.Println("received:", got.UUID, oncebox.Key(got), string(got.Payload))
	events, _ = oncetest.Events(ctx, db, pg)
	fmt.Println("after the drain:", events[0].Status)
	// Output:
	// in the transaction: order-created o-42 {"order_id":"o-42"} PENDING
	// drained: 1 <nil>
	// received: msg-1 o-42 {"order_id":"o-42"}
	// after the drain: PROCESSED
}
