package middleware_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/migrate"
)

// The one safe order of the consuming side: the poison queue outermost,
// Watermill's Retry inside it, the inbox innermost. Each attempt then runs
// in a fresh inbox transaction (a failed attempt's writes roll back with
// its inbox row), and the poison queue parks only what Retry gave up on.
// On a router, add them in this order: the first added is the outermost.
//
//	router.AddMiddleware(poison.Middleware, retry.Middleware, inbox.Middleware)
//
// With the inbox outside Retry, every attempt would share one transaction,
// and the effects of a failed attempt would commit with the next one's.
func Example_order() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS example_order CASCADE; CREATE SCHEMA example_order;"+
		"CREATE TABLE example_order.shipments (order_id text)")
	defer pool.Exec(ctx, "DROP SCHEMA example_order CASCADE") //nolint:errcheck
	db := wsql.BeginnerFromPgx(pool)
	pg, _ := postgres.New(oncebox.TablesConfig{Schema: "example_order"})
	if err := migrate.Migrate(ctx, db, pg); err != nil {
		panic(err)
	}

	poison, _ := middleware.NewPoisonQueue(db, middleware.PoisonConfig{Dialect: pg}, nil)
	retry := wmw.Retry{MaxRetries: 2, InitialInterval: time.Millisecond, MaxInterval: 4 * time.Millisecond, Multiplier: 2}
	inbox, _ := middleware.NewInbox(db, middleware.InboxConfig{Dialect: pg}, nil)

	attempts := 0
	ship := func(msg *message.Message) ([]*message.Message, error) {
		attempts++
		tx, _ := middleware.TxFromContext(msg.Context()) // the inbox's transaction
		if _, err := tx.ExecContext(msg.Context(), "INSERT INTO example_order.shipments VALUES ($1)", string(msg.Payload)); err != nil {
			return nil, err
		}
		if string(msg.Payload) == "o-poison" || attempts == 1 {
			return nil, errors.New("carrier API down") // rolls back this attempt's shipment
		}
		return nil, nil
	}
	handler := poison.Middleware(retry.Middleware(inbox.Middleware(ship))) // what the router builds

	event := func(id, orderID string) *message.Message {
		msg := message.NewMessage(watermill.NewUUID(), []byte(orderID))
		msg.Metadata.Set(oncebox.HeaderEventID, id)
		return msg
	}
	shipped := event("0193c3a0-7c5e-7000-8000-000000000001", "o-42")
	_, err = handler(shipped) // fails once, retried, committed
	fmt.Println("o-42:", attempts, "attempts, error:", err)
	_, err = handler(shipped) // the broker redelivers it
	fmt.Println("o-42 again:", attempts, "attempts, error:", err)
	attempts = 0
	_, err = handler(event("0193c3a0-7c5e-7000-8000-000000000002", "o-poison"))
	fmt.Println("o-poison:", attempts, "attempts, error:", err)

	var shipments, parked int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM example_order.shipments").Scan(&shipments)
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM "+pg.Tables().DLQ).Scan(&parked)
	fmt.Println("shipments:", shipments, "parked:", parked)
	// Output:
	// o-42: 2 attempts, error: <nil>
	// o-42 again: 2 attempts, error: <nil>
	// o-poison: 3 attempts, error: <nil>
	// shipments: 1 parked: 1
}
