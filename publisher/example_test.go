package publisher_test

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// The order row and its event commit together, or not at all.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS example_shop CASCADE; CREATE SCHEMA example_shop;"+
		"CREATE TABLE example_shop.orders (id text PRIMARY KEY)")
	defer pool.Exec(ctx, "DROP SCHEMA example_shop CASCADE") //nolint:errcheck

	// Once, at start-up: the dialect and the tables.
	pg, err := postgres.New(oncebox.TablesConfig{Schema: "example_shop"})
	if err != nil {
		panic(err)
	}
	if err := migrate.Migrate(ctx, wsql.BeginnerFromPgx(pool), pg); err != nil {
		panic(err)
	}
	config := publisher.Config{Dialect: pg}

	// In a request: the business row and the event in one transaction.
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "INSERT INTO example_shop.orders (id) VALUES ('o-42')"); err != nil {
		panic(err)
	}
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), config, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{"order_id":"o-42"}`))
	oncebox.SetKey(msg, "o-42") // the Kafka message key: per-order ordering
	if err := pub.Publish("order-created", msg); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	id, _ := oncebox.EventIDOf(msg)
	var status string
	_ = pool.QueryRow(ctx, "SELECT status FROM example_shop.outbox_events WHERE id = $1", id.String()).Scan(&status)
	fmt.Println("event id version:", id.Version())
	fmt.Println("event type:", msg.Metadata.Get(oncebox.HeaderEventType))
	fmt.Println("status:", status)
	// Output:
	// event id version: 7
	// event type: order-created
	// status: PENDING
}

// Publishing without a transaction is an error, not a silent auto-commit.
func ExampleNewPublisher_refusesAPool() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cmp.Or(os.Getenv("ONCEBOX_TEST_POSTGRES_DSN"), "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	pg, _ := postgres.New(oncebox.TablesConfig{})
	_, err = publisher.NewPublisher(wsql.BeginnerFromPgx(pool), publisher.Config{Dialect: pg}, nil)
	fmt.Println(err)
	// Output:
	// oncebox: no transaction: the outbox publisher must be built over the caller's open transaction (got sql.PgxBeginner; set Config.AllowNonTransactionalDangerously to write outside one)
}
