package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	wake, err := runPublishWakeCost(ctx, e, d)
	if err != nil {
		return nil, err
	}
	return append(rows, wake...), nil
}

// runPublishWakeCost measures what the wake-up on commit costs a business
// transaction (an order INSERT and one event, as above) at 1 and 16
// concurrent writers, each on its own connection, with a relay-like LISTEN
// session attached: the publisher with DisableWakeOnCommit (baseline), with
// its default limiter (one notification per type per 5ms in the process),
// and with the limiter off (a notification in every transaction, the cost
// the limiter avoids). Variants alternate in rounds; the figure is the
// median round's wall time per transaction. All writers publish one event
// type, so the limiter lets at most 200 notifications a second through.
func runPublishWakeCost(ctx context.Context, e *env, d dialects.Dialect) ([]row, error) {
	// A pool of its own: the shared one holds 8 connections, and this needs
	// 16 writers and the listener.
	pool, err := newPool(ctx, e.dsn, func(c *pgxpool.Config) { c.MaxConns = 20 })
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	listen, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer listen.Release()
	if _, err := listen.Exec(ctx, "LISTEN "+pgx.Identifier{dialects.NotifyChannel(d.Tables())}.Sanitize()); err != nil {
		return nil, err
	}
	// Drain the notifications as a relay would, so the queue does not grow.
	drainCtx, stopDrain := context.WithCancel(ctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for drainCtx.Err() == nil {
			_, _ = listen.Conn().WaitForNotification(drainCtx)
		}
	}()
	defer func() { stopDrain(); <-drained }()

	variants := []struct {
		name string
		cfg  publisher.Config
	}{
		{"publisher without wake-up", publisher.Config{Dialect: d, DisableWakeOnCommit: true}},
		{"publisher with wake-up (default: ≤ 1 NOTIFY per type per 5ms)", publisher.Config{Dialect: d}},
		{"publisher with a NOTIFY in every transaction (no limiter)", publisher.Config{Dialect: d, WakeLimit: -1}},
	}
	var rows []row
	for _, writers := range []int{1, 16} {
		conns := make([]*pgxpool.Conn, writers)
		for i := range conns {
			if conns[i], err = pool.Acquire(ctx); err != nil {
				for _, c := range conns[:i] {
					c.Release()
				}
				return nil, err
			}
		}
		txs := e.n(map[int]int{1: 2000, 16: 400}[writers], 20) // per writer and variant
		const rounds = 5
		results := make([][]float64, len(variants))
		for r := 0; r < rounds; r++ {
			for k := range variants {
				v := variants[(k+r)%len(variants)] // rotate who goes first
				idx := (k + r) % len(variants)
				us, err := concurrentTxs(ctx, conns, txs/rounds, func(tx pgx.Tx) error {
					pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), v.cfg, watermill.NopLogger{})
					if err != nil {
						return err
					}
					return pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), orderPayload))
				})
				if err != nil {
					for _, c := range conns {
						c.Release()
					}
					return nil, err
				}
				results[idx] = append(results[idx], us)
			}
		}
		for _, c := range conns {
			c.Release()
		}
		var group []row
		for k, v := range variants {
			group = append(group, row{Case: fmt.Sprintf("%s, %d writer(s)", v.name, writers), Value: median(results[k]), Unit: "µs/tx",
				Baseline: k == 0, Note: fmt.Sprintf("%d tx per writer in %d rounds; goal ≤ 1.15× for the default", txs, rounds)})
		}
		rows = append(rows, withRatios(group)...)
	}
	return rows, nil
}

// concurrentTxs runs n business transactions on each connection at once and
// returns the wall time per transaction in microseconds (the inverse of the
// throughput of all writers together).
func concurrentTxs(ctx context.Context, conns []*pgxpool.Conn, n int, events func(tx pgx.Tx) error) (float64, error) {
	start := time.Now()
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = timeTxs(ctx, c.Conn(), n, events)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(time.Since(start).Microseconds()) / float64(n*len(conns)), nil
}

// rawInsert writes perTx rows with the columns the publisher fills, built by
// hand: the ids and the metadata JSON are the least any outbox must compute.
func rawInsert(ctx context.Context, tx pgx.Tx, d dialects.Dialect, perTx int) error {
	evs, err := newEventRows(perTx, "order-created", time.Now().UTC())
	if err != nil {
		return err
	}
	return d.InsertEvents(ctx, wsql.TxFromPgx(tx), evs)
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
