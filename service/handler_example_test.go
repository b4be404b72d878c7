package service_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/service"
)

// A consumer that ships an order and announces it: the shipment, the
// order-shipped event and the inbox's record of order-placed commit in one
// transaction, or none of them. No router middleware is needed: the
// handler carries the poison queue, the retries and the inbox. (Not run:
// it needs a PostgreSQL server with the shipments table.)
func ExampleService_AddPgxHandler() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	broker := gochannel.NewGoChannel(gochannel.Config{}, nil) // RabbitMQ's or Kafka's in a service
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	if err != nil {
		panic(err)
	}
	cfg := oncebox.Config{Inbox: oncebox.InboxConfig{Enabled: true}}
	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, nil, service.WithRelay(broker), service.WithRouter(router))
	if err != nil {
		panic(err)
	}
	_, err = svc.AddPgxHandler(router, "ship-order", "order-placed", broker,
		func(ctx context.Context, tx pgx.Tx, msg *message.Message) error {
			eventID := msg.Metadata.Get(oncebox.HeaderEventID)
			if _, err := tx.Exec(ctx, "INSERT INTO shipments (event_id) VALUES ($1)", eventID); err != nil {
				return err
			}
			pub, err := svc.PgxPublisher(tx)
			if err != nil {
				return err
			}
			return pub.Publish("order-shipped", message.NewMessage(watermill.NewUUID(), msg.Payload))
		})
	if err != nil {
		panic(err) // inbox.enabled is false, the pool is a *sql.DB, a name used twice…
	}
	fmt.Println(svc.Run(ctx))
}
