// Package oncetest helps the tests of a service that uses oncebox, the way
// rivertest helps River users: no broker and no relay process needed.
//
//   - [RequireEvents] asserts that a transaction (or the database) holds the
//     events a test expects in the outbox (type, key, payload, metadata),
//     and shows what it holds instead when they differ.
//   - [Drain] relays the due events synchronously into a Watermill
//     publisher of the test's choice (gochannel, a recorder, a real broker's
//     publisher), through the relay's own claim, send and finalize path.
//   - [NewSchema] creates a fresh PostgreSQL schema or MySQL/MariaDB
//     database, migrates the oncebox tables into it and drops it when the
//     test ends: one per test, so that tests run in parallel, each with its
//     own outbox, inbox and DLQ tables.
//
// Every helper takes a testing.TB (or returns an error): the package does not
// tie a test to an assertion library.
//
// A test of a service's publishing side typically reads:
//
//	d := oncetest.NewSchema(t, wsql.BeginnerFromPgx(pool), "postgres")
//	tx, _ := pool.Begin(ctx)
//	svc.PlaceOrder(ctx, tx, d, "o-42") // publishes order-created in tx
//	oncetest.RequireEvents(t, wsql.TxFromPgx(tx), d, []oncetest.Expected{
//		{Type: "order-created", Key: "o-42", Payload: []byte(`{"order_id":"o-42"}`)},
//	})
package oncetest
