// Command quickstart shows oncebox end to end on embedded defaults: SQLite
// in a temporary file and an in-process Kafka, nothing installed and no
// service started; or the database of $DATABASE_URL (postgres://… or
// mysql://…) and the brokers of $KAFKA_BROKERS.
//
// It writes orders and their events in business transactions (some rolled
// back), leaves a batch stuck as if a relay had crashed after claiming it,
// relays everything to Kafka and consumes it with a router whose inbox drops
// the duplicates it injects, and ends with one line. Every oncebox component
// (relay, publisher, poison queue, retry, inbox, jobs) comes from one
// oncebox.Config through service.New.
//
//	demo: published=N delivered=N rolled_back=R duplicates_skipped=D recovered=S lost=0 doubled=0
//
// It exits non-zero if an event was lost, handled twice, or delivered from a
// rolled-back transaction.
//
//	go run ./examples/quickstart                                   # or: make demo
//	DATABASE_URL=postgres://root@127.0.0.1:5432/test make demo     # on PostgreSQL
//	DATABASE_URL=mysql://root@127.0.0.1:3306/test make demo        # on MySQL/MariaDB
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/service"
)

const (
	eventType = "order-created"
	topic     = "orders"
)

// schema is the demo's own schema (PostgreSQL) or database (MySQL) on a
// server: named after the process, so that two demos on one server (two
// terminals, parallel CI jobs) do not drop each other's tables. It is
// dropped at the end.
var schema = fmt.Sprintf("oncebox_demo_%d", os.Getpid())

type options struct {
	dsn           string
	brokers       []string
	orders        int
	rollbackEvery int
	stuck         int
	duplicates    int
	timeout       time.Duration
	verbose       bool
}

func main() {
	o := options{}
	flag.StringVar(&o.dsn, "database-url", os.Getenv("DATABASE_URL"), "postgres://… or mysql://… ($DATABASE_URL); empty: SQLite in a temporary file")
	brokers := flag.String("kafka-brokers", os.Getenv("KAFKA_BROKERS"), "Kafka brokers, comma-separated ($KAFKA_BROKERS); empty: an in-process Kafka")
	flag.IntVar(&o.orders, "orders", 400, "orders to write")
	flag.IntVar(&o.rollbackEvery, "rollback-every", 7, "roll back every n-th business transaction")
	flag.IntVar(&o.stuck, "stuck", 25, "events left IN_PROCESS by a simulated crashed relay")
	flag.IntVar(&o.duplicates, "duplicates", 30, "delivered events sent to Kafka a second time")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Second, "give up after this long")
	flag.BoolVar(&o.verbose, "v", false, "log what the components do")
	flag.Parse()
	if *brokers != "" {
		o.brokers = strings.Split(*brokers, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ok, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo: error:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// counters are what the demo shows while it runs and checks at the end.
type counters struct {
	published, rolledBack, duplicatesSkipped, recovered atomic.Int64
}

func run(ctx context.Context, o options) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	logger := watermill.LoggerAdapter(watermill.NopLogger{})
	if o.verbose {
		logger = watermill.NewStdLogger(false, false)
	}

	// The database: SQLite in a temporary file, or a schema of its own on
	// the server of DATABASE_URL; the oncebox tables are migrated below.
	db, err := openDatabase(ctx, o.dsn)
	if err != nil {
		return false, err
	}
	defer db.close()

	// Kafka: the given brokers, or one in this process.
	brokers := o.brokers
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topic))
		if err != nil {
			return false, err
		}
		defer cluster.Close()
		brokers = cluster.ListenAddrs()
	}
	fmt.Printf("demo: Kafka at %s, %s\n", strings.Join(brokers, ","), db.where)

	// The whole configuration, as oncebox.LoadConfigFile would read it from
	// a file: service.New builds every component from it.
	cfg := oncebox.Config{
		Database: db.name,
		Tables:   db.tables,
		Outbox: oncebox.OutboxConfig{
			Events: map[string]oncebox.EventSettings{eventType: {Topic: topic, BatchSize: 100,
				Polling: oncebox.PollingSettings{MinFixedDelay: 20 * time.Millisecond, MaxFixedDelay: 500 * time.Millisecond, Multiplier: 2}}},
			MaxBatchProcessingTime: 3 * time.Second, // short, so that the stuck batch comes back quickly
			DLQ:                    oncebox.DLQConfig{Enabled: true},
		},
		Inbox: oncebox.InboxConfig{Enabled: true, // inbox, poison queue and retry; clean-up and DLQ retry in Run
			Retry: oncebox.RetryConfig{MaxRetries: oncebox.Int(3), InitialInterval: 10 * time.Millisecond}},
	}
	var c counters
	var delivered []deliveredEvent
	start := time.Now() // written by the producer, read after the run

	// The relay's publisher. The relay refuses a publisher that could still be waiting for the
	// cluster when max-batch-processing-time (3s here) sends a batch again,
	// so the demo's Kafka timeouts are cut to fit: 0.5s + 2 × 1s.
	sc := kafka.RecommendedSaramaConfig()
	sc.Producer.Timeout = 800 * time.Millisecond
	sc.Net.ReadTimeout = time.Second
	sc.Metadata.Timeout = 500 * time.Millisecond
	sc.Producer.Retry.Max = 1
	kpub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, SaramaConfig: sc}, logger)
	if err != nil {
		return false, err
	}
	defer kpub.Close()

	// Everything oncebox does, from cfg: the relay to Kafka, the consumer's
	// middleware, the background jobs.
	svc, err := service.New(db.beginner, cfg, logger, service.WithRelay(kpub),
		service.WithRelayConfig(poller.Config{Recovery: poller.Schedule{Min: time.Second, Max: 2 * time.Second, Multiplier: 2}}),
		service.WithHooks(service.Hooks{Poller: &relayHooks{c: &c}, Inbox: &inboxHooks{c: &c}}))
	if err != nil {
		return false, err
	}
	if err := svc.Migrate(ctx); err != nil {
		return false, err
	}

	// 1. A relay claimed a batch and crashed: its events are IN_PROCESS.
	stuckIDs, err := writeOrders(ctx, db, svc, o.stuck, 0, &c, nil)
	if err != nil {
		return false, err
	}
	if err := claimAndCrash(ctx, db.beginner, svc.Dialect(), len(stuckIDs)); err != nil {
		return false, err
	}
	fmt.Printf("demo: %d events left IN_PROCESS by a crashed relay\n", len(stuckIDs))

	// 2. The consumer: svc.Middleware (poison queue, retry, inbox), handler.
	sub, err := kafkawm.NewSubscriber(kafka.RecommendedSubscriberConfig(brokers, "demo-shipping"), logger)
	if err != nil {
		return false, err
	}
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return false, err
	}
	router.AddMiddleware(svc.Middleware) // the poison queue, Retry (inbox.retry) and the inbox, in that order
	router.AddConsumerHandler("ship-order", topic, sub, shipOrder(db))

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	errc := make(chan error, 2)
	go func() { errc <- svc.Run(runCtx) }()
	go func() { errc <- router.Run(runCtx) }()
	<-svc.Running()
	<-router.Running()

	// 3. Business transactions while everything runs; every n-th rolls back.
	type written struct {
		ids []string
		err error
	}
	producer := make(chan written, 1)
	go func() {
		ids, err := writeOrders(ctx, db, svc, o.orders, o.rollbackEvery, &c, &delivered)
		producer <- written{ids, err}
	}()
	var w written
	producerDone := false
	if err := waitFor(ctx, start, &c, db, func(int) bool {
		if !producerDone {
			select {
			case w = <-producer:
				producerDone = true
			default:
			}
		}
		return producerDone
	}); err != nil {
		return false, err
	}
	if w.err != nil {
		return false, w.err
	}
	committed := append(stuckIDs, w.ids...)

	// 4. Duplicates, as a lost broker confirm would make them: events already
	// delivered are sent to Kafka again.
	dups := min(o.duplicates, len(delivered))
	if err := resend(kpub, delivered[:dups]); err != nil {
		return false, err
	}
	fmt.Printf("demo: %d delivered events sent to Kafka again\n", dups)

	// 5. Wait for every committed event, and the duplicates to be seen.
	if err := waitFor(ctx, start, &c, db, func(d int) bool {
		return d >= len(committed) && c.duplicatesSkipped.Load() >= int64(dups)
	}); err != nil {
		fmt.Println("demo:", err)
	}
	stopRun()
	for range 2 {
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
			return false, err
		}
	}
	return report(context.Background(), db, &c, committed)
}

// shipOrder is the consumer's business: it records a shipment in the
// inbox's transaction, so the shipment and the event id commit together.
func shipOrder(db *demoDB) message.NoPublishHandlerFunc {
	insert := "INSERT INTO " + db.table("shipments") + " (event_id, order_id) VALUES (" + db.ph(1) + ", " + db.ph(2) + ")"
	return func(msg *message.Message) error {
		tx, ok := middleware.TxFromContext(msg.Context())
		if !ok {
			return errors.New("no inbox transaction: router.AddMiddleware(svc.Middleware) is missing")
		}
		_, err := tx.ExecContext(msg.Context(), insert, msg.Metadata.Get(oncebox.HeaderEventID), oncebox.Key(msg))
		return err
	}
}

type deliveredEvent struct {
	id      string
	orderID string
	payload []byte
}

// writeOrders writes n orders, each with its event, one business
// transaction each; every rollbackEvery-th transaction rolls back. It
// returns the event ids that committed.
func writeOrders(ctx context.Context, db *demoDB, svc *service.Service, n, rollbackEvery int,
	c *counters, sent *[]deliveredEvent) ([]string, error) {
	var ids []string
	insert := "INSERT INTO " + db.table("orders") + " (id, total) VALUES (" + db.ph(1) + ", " + db.ph(2) + ")"
	for i := 1; i <= n; i++ {
		orderID := fmt.Sprintf("o-%s", watermill.NewShortUUID())
		var msg *message.Message
		rollback := rollbackEvery > 0 && i%rollbackEvery == 0
		err := inTx(ctx, db.db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, insert, orderID, 100+i); err != nil {
				return err
			}
			pub, err := svc.Publisher(wsql.TxFromStdSQL(tx)) // in the business transaction
			if err != nil {
				return err
			}
			msg, err = publisher.PublishJSON(ctx, pub, eventType, map[string]any{"order_id": orderID, "total": 100 + i},
				publisher.WithKey(orderID))
			if err != nil {
				return err
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		switch {
		case errors.Is(err, errRollback):
			c.rolledBack.Add(1)
		case err != nil:
			return nil, err
		default:
			c.published.Add(1)
			id := msg.Metadata.Get(oncebox.HeaderEventID)
			ids = append(ids, id)
			if sent != nil {
				*sent = append(*sent, deliveredEvent{id: id, orderID: orderID, payload: msg.Payload})
			}
		}
	}
	return ids, nil
}

var errRollback = errors.New("the business rule said no")

// inTx runs fn in a transaction of db: committed when fn returns nil,
// rolled back otherwise.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// claimAndCrash claims n events the way a relay does and never finalizes
// them: the relay "crashed" after its claim committed.
func claimAndCrash(ctx context.Context, db wsql.Beginner, d dialects.Dialect, n int) error {
	token, err := oncebox.NewEventID()
	if err != nil {
		return err
	}
	_, err = d.Claim(ctx, db, dialects.ClaimParams{EventType: eventType, Limit: n, Token: token, Now: time.Now().UTC()})
	return err
}

// resend publishes events to Kafka again, with their original ids.
func resend(pub message.Publisher, events []deliveredEvent) error {
	msgs := make([]*message.Message, len(events))
	for i, e := range events {
		msgs[i] = message.NewMessage(watermill.NewUUID(), e.payload)
		msgs[i].Metadata.Set(oncebox.HeaderEventID, e.id)
		msgs[i].Metadata.Set(oncebox.HeaderEventType, eventType)
		oncebox.SetKey(msgs[i], e.orderID)
	}
	return pub.Publish(topic, msgs...)
}

// waitFor prints progress twice a second until done(delivered) holds.
func waitFor(ctx context.Context, start time.Time, c *counters, db *demoDB, done func(delivered int) bool) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		var d int
		if err := db.db.QueryRowContext(ctx, "SELECT count(DISTINCT event_id) FROM "+db.table("shipments")).Scan(&d); err != nil {
			return err
		}
		line := fmt.Sprintf("demo: %5.1fs published=%d delivered=%d rolled_back=%d duplicates_skipped=%d recovered=%d",
			time.Since(start).Seconds(), c.published.Load(), d, c.rolledBack.Load(), c.duplicatesSkipped.Load(), c.recovered.Load())
		if done(d) {
			if line != last {
				fmt.Println(line)
			}
			return nil
		}
		if line != last {
			fmt.Println(line)
			last = line
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// report checks the outcome against what was committed and prints the
// summary line.
func report(ctx context.Context, db *demoDB, c *counters, committed []string) (bool, error) {
	counts := map[string]int{}
	rows, err := db.db.QueryContext(ctx, "SELECT event_id, count(*) FROM "+db.table("shipments")+" GROUP BY event_id")
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return false, err
		}
		counts[id] = n
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	_ = rows.Close()
	want := map[string]bool{}
	lost, doubled := 0, 0
	for _, id := range committed {
		want[id] = true
		switch counts[id] {
		case 0:
			lost++
		case 1:
		default:
			doubled++
		}
	}
	phantom := 0 // delivered but never committed: a rolled-back event
	for id := range counts {
		if !want[id] {
			phantom++
		}
	}
	fmt.Printf("demo: published=%d delivered=%d rolled_back=%d duplicates_skipped=%d recovered=%d lost=%d doubled=%d phantom=%d\n",
		c.published.Load(), len(counts)-phantom, c.rolledBack.Load(), c.duplicatesSkipped.Load(), c.recovered.Load(), lost, doubled, phantom)
	return lost == 0 && doubled == 0 && phantom == 0, nil
}

// relayHooks counts the stuck events the relay recovered.
type relayHooks struct {
	poller.NopHooks
	c *counters
}

func (h *relayHooks) JobDone(j poller.JobInfo) {
	if j.Job == poller.JobRecovery {
		h.c.recovered.Add(int64(j.Rows))
	}
}

// inboxHooks counts the duplicates the inbox dropped.
type inboxHooks struct {
	middleware.NopInboxHooks
	c *counters
}

func (h *inboxHooks) Duplicate(string, bool) { h.c.duplicatesSkipped.Add(1) }
