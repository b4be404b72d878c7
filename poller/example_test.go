package poller_test

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
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// The poller relays committed events to any Watermill publisher; here an
// in-memory Go channel stands in for Kafka.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS example_relay CASCADE; CREATE SCHEMA example_relay")
	defer pool.Exec(ctx, "DROP SCHEMA example_relay CASCADE") //nolint:errcheck

	pg, _ := postgres.New(oncebox.TablesConfig{Schema: "example_relay"})
	if err := migrate.Migrate(ctx, wsql.BeginnerFromPgx(pool), pg); err != nil {
		panic(err)
	}
	cfg := oncebox.Config{Outbox: oncebox.OutboxConfig{Events: map[string]oncebox.EventSettings{
		"order-created": {Topic: "orders"},
	}}}

	// The broker: subscribe before anything is published.
	broker := gochannel.NewGoChannel(gochannel.Config{}, watermill.NopLogger{})
	defer broker.Close()
	orders, err := broker.Subscribe(ctx, "orders")
	if err != nil {
		panic(err)
	}

	// A business transaction writes the event.
	tx, _ := pool.Begin(ctx)
	pub, _ := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: pg, Oncebox: cfg}, nil)
	msg := message.NewMessage("msg-1", []byte(`{"order_id":"o-42"}`))
	oncebox.SetKey(msg, "o-42")
	if err := pub.Publish("order-created", msg); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	// The relay delivers it.
	p, err := poller.New(wsql.BeginnerFromPgx(pool), broker, poller.Config{Dialect: pg, Oncebox: cfg}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	go func() { _ = p.Run(ctx) }()
	defer p.Close()

	got := <-orders
	got.Ack()
	fmt.Println("uuid:", got.UUID)
	fmt.Println("payload:", string(got.Payload))
	fmt.Println("type:", got.Metadata.Get(oncebox.HeaderEventType), "key:", oncebox.Key(got))
	fmt.Println("same event id:", got.Metadata.Get(oncebox.HeaderEventID) == msg.Metadata.Get(oncebox.HeaderEventID))
	// Output:
	// uuid: msg-1
	// payload: {"order_id":"o-42"}
	// type: order-created key: o-42
	// same event id: true
}
