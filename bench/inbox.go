package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/cache/rediscache"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// runInbox measures the per-message cost of the inbox middleware. The
// baseline is a bare handler doing what a real one does: write its effect (one
// INSERT) in a transaction of its own and commit. The inbox's handler writes
// the same effect in the inbox's transaction, so the difference is the
// inbox's own work (the insert-or-ignore of the id), with no cache, the
// in-process cache and Redis. Duplicates are answered by the table or by a
// cache hit, without running the handler. Messages are handled one after
// another on one goroutine: latencies per message, not throughput.
func runInbox(ctx context.Context, e *env) ([]row, error) {
	d, err := e.freshSchema(ctx)
	if err != nil {
		return nil, err
	}
	n := e.n(2000, 200)
	db := wsql.BeginnerFromPgx(e.pool)

	mem, err := cache.NewMemory(n*4, time.Hour)
	if err != nil {
		return nil, err
	}
	addr := os.Getenv("ONCEBOX_BENCH_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redis at %s: %w", addr, err)
	}
	name := "oncebox-bench-" + watermill.NewShortUUID()
	defer func() {
		keys, _ := client.Keys(context.Background(), name+":*").Result()
		if len(keys) > 0 {
			client.Del(context.Background(), keys...)
		}
	}()
	rc, err := rediscache.New(client, rediscache.Config{Name: name, TTL: time.Hour, Timeout: time.Second})
	if err != nil {
		return nil, err
	}

	if _, err := e.pool.Exec(ctx, "CREATE TABLE "+benchSchema+".effects (event_id text NOT NULL)"); err != nil {
		return nil, err
	}
	insertEffect := "INSERT INTO " + benchSchema + ".effects (event_id) VALUES ($1)"
	bare := func(msg *message.Message) ([]*message.Message, error) {
		tx, err := e.pool.Begin(msg.Context())
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(msg.Context()) //nolint:errcheck
		if _, err := tx.Exec(msg.Context(), insertEffect, msg.Metadata.Get(oncebox.HeaderEventID)); err != nil {
			return nil, err
		}
		return nil, tx.Commit(msg.Context())
	}
	inTx := func(msg *message.Message) ([]*message.Message, error) {
		tx, ok := middleware.PgxTxFromContext(msg.Context())
		if !ok {
			return nil, fmt.Errorf("no inbox transaction")
		}
		_, err := tx.Exec(msg.Context(), insertEffect, msg.Metadata.Get(oncebox.HeaderEventID))
		return nil, err
	}
	wrap := func(c cache.Cache) (message.HandlerFunc, error) {
		in, err := middleware.NewInbox(db, middleware.InboxConfig{Dialect: d, Cache: c}, watermill.NopLogger{})
		if err != nil {
			return nil, err
		}
		return in.Middleware(inTx), nil
	}
	type variant struct {
		name  string
		cache cache.Cache
	}
	rows := []row{}
	baseline, err := timeHandler(bare, newEvents(n))
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{Case: "bare handler: its INSERT in its own transaction, no inbox", Value: baseline,
		Unit: "µs/msg", Baseline: true})
	for _, v := range []variant{{"no cache", nil}, {"in-process cache", mem}, {"Redis cache", rc}} {
		h, err := wrap(v.cache)
		if err != nil {
			return nil, err
		}
		events := newEvents(n)
		fresh, err := timeHandler(h, events)
		if err != nil {
			return nil, err
		}
		dup, err := timeHandler(h, events) // the same ids again
		if err != nil {
			return nil, err
		}
		dupCase := "duplicate answered by the table"
		if v.cache != nil {
			dupCase = "duplicate answered by a cache hit"
		}
		rows = append(rows,
			row{Case: "inbox, " + v.name + ", new event", Value: fresh, Unit: "µs/msg",
				Note: "the handler's INSERT and the id's insert-or-ignore in one transaction"},
			row{Case: "inbox, " + v.name + ", " + dupCase, Value: dup, Unit: "µs/msg"})
	}
	return withRatios(rows), nil
}

func newEvents(n int) []*message.Message {
	msgs := make([]*message.Message, n)
	for i := range msgs {
		id, _ := oncebox.NewEventID()
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{}`))
		msgs[i].Metadata.Set(oncebox.HeaderEventID, id.String())
	}
	return msgs
}

// timeHandler runs h on every message (each a fresh copy, as a redelivery
// would be) and returns the mean microseconds per message.
func timeHandler(h message.HandlerFunc, msgs []*message.Message) (float64, error) {
	copies := make([]*message.Message, len(msgs))
	for i, m := range msgs {
		copies[i] = m.Copy()
	}
	start := time.Now()
	for _, m := range copies {
		if _, err := h(m); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / 1e3 / float64(len(msgs)), nil
}
