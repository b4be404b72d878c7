package service_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/jackc/pgx/v5/pgxpool"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/service"
)

// A service described by one YAML document. New does no I/O: the pool
// connects when Run, Migrate or a message first needs it.
func ExampleNew() {
	cfg, err := oncebox.LoadConfig(strings.NewReader(`
oncebox:
  tables: {schema: billing, prefix: eu_}
  outbox:
    sender: {type: rabbitmq}
    dlq: {enabled: true}
  inbox:
    enabled: true
    retry: {max-retries: 5, initial-interval: 200ms}
`))
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	broker := gochannel.NewGoChannel(gochannel.Config{}, nil) // the relay's publisher: RabbitMQ's in a service
	defer broker.Close()
	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, nil, service.WithRelay(broker))
	if err != nil {
		panic(err)
	}
	fmt.Println(svc.Dialect().Name(), svc.Dialect().Tables().Events, *svc.Config().Inbox.Retry.MaxRetries)
	for _, w := range svc.Warnings() {
		fmt.Println(w)
	}
	// Output:
	// postgres billing.eu_outbox_events 5
	// outbox.sender.type is "rabbitmq" but the relay publishes with a *gochannel.GoChannel
}

// A service that runs a router and an HTTP server of its own under one
// Run: the router first, the relay (none here) once the router has
// subscribed, and everything stopped together. Without a relay or an
// inbox, Run touches no database.
func ExampleWithRouter() {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	broker := gochannel.NewGoChannel(gochannel.Config{}, nil) // RabbitMQ's or Kafka's subscriber in a service
	router, err := message.NewRouter(message.RouterConfig{}, nil)
	if err != nil {
		panic(err)
	}
	svc, err := service.New(wsql.BeginnerFromPgx(pool), oncebox.Config{}, nil, service.WithRouter(router))
	if err != nil {
		panic(err)
	}
	consumed := make(chan struct{})
	router.AddConsumerHandler("ship-order", "orders", broker, func(msg *message.Message) error {
		fmt.Println("consumed", string(msg.Payload))
		close(consumed)
		return nil
	})
	svc.Go(func(ctx context.Context) error { // srv.Serve(ln) in a service
		<-ctx.Done()
		fmt.Println("HTTP server stopped")
		return nil
	})
	go func() {
		<-svc.Running() // the router has subscribed
		if err := broker.Publish("orders", message.NewMessage(watermill.NewUUID(), []byte("order 1"))); err != nil {
			panic(err)
		}
		<-consumed
		_ = svc.Close()
	}()
	fmt.Println("Run returned", svc.Run(context.Background()))
	// Output:
	// consumed order 1
	// HTTP server stopped
	// Run returned <nil>
}
