package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// runPublish measures a business transaction (one INSERT of an order, then
// its events, then COMMIT) with the oncebox publisher against the same
// transaction writing the same rows with a hand-written multi-row INSERT.
// Both run on one connection, alternating in rounds so that drift in the
// database's speed hits both alike; the figure is the median round.
func runPublish(ctx context.Context, e *env) ([]row, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := e.pool.Exec(ctx, "CREATE TABLE "+benchSchema+".orders (id bigserial PRIMARY KEY, total int NOT NULL)"); err != nil {
		return nil, err
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()

	payload := orderPayload
	cfg := publisher.Config{Dialect: d}
	var rows []row
	for _, perTx := range []int{1, 100} {
		txs := e.n(map[int]int{1: 2000, 100: 300}[perTx], 20)
		const rounds = 5
		var oncebox, raw []float64
		for r := 0; r < rounds; r++ {
			runOncebox := func() (float64, error) {
				return timeTxs(ctx, conn.Conn(), txs/rounds, func(tx pgx.Tx) error {
					pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), cfg, watermill.NopLogger{})
					if err != nil {
						return err
					}
					msgs := make([]*message.Message, perTx)
					for i := range msgs {
						msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
						msgs[i].Metadata.Set("tenant", "acme")
					}
					return pub.Publish("order-created", msgs...)
				})
			}
			runRaw := func() (float64, error) {
				return timeTxs(ctx, conn.Conn(), txs/rounds, func(tx pgx.Tx) error {
					return rawInsert(ctx, tx, d, perTx)
				})
			}
			// Alternate which goes first, so that neither always runs on a
			// warmer (or more checkpoint-laden) database.
			var o, w float64
			var errO, errW error
			if r%2 == 0 {
				o, errO = runOncebox()
				w, errW = runRaw()
			} else {
				w, errW = runRaw()
				o, errO = runOncebox()
			}
			if err := errors.Join(errO, errW); err != nil {
				return nil, err
			}
			oncebox, raw = append(oncebox, o), append(raw, w)
		}
		name := fmt.Sprintf("%d event(s) per transaction", perTx)
		rows = append(rows, withRatios([]row{
			{Case: "raw multi-row INSERT, " + name, Value: median(raw), Unit: "µs/tx", Baseline: true},
			{Case: "oncebox publisher, " + name, Value: median(oncebox), Unit: "µs/tx",
				Note: fmt.Sprintf("%d tx in %d rounds; goal ≤ 1.20×", txs, rounds)},
		})...)
	}
	return rows, nil
}

// rawInsert writes perTx rows with the columns the publisher fills, built by
// hand: the ids and the metadata JSON are the least any outbox must compute.
func rawInsert(ctx context.Context, tx pgx.Tx, d dialects.Dialect, perTx int) error {
	evs, err := newEventRows(perTx, "order-created", time.Now().UTC())
	if err != nil {
		return err
	}
	q := d.EventsInsert(evs)
	_, err = tx.Exec(ctx, q.SQL, q.Args...)
	return err
}

// timeTxs runs n business transactions, each inserting an order and calling
// events, and returns the mean microseconds per transaction.
func timeTxs(ctx context.Context, conn *pgx.Conn, n int, events func(tx pgx.Tx) error) (float64, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+benchSchema+".orders (total) VALUES ($1)", i); err != nil {
				return err
			}
			return events(tx)
		})
		if err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / float64(n), nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
