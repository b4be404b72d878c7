// Command postgres is Watermill's real-world example
// transactional-events-forwarder (MySQL → Google Cloud Pub/Sub through
// components/forwarder) after the swap to oncebox, on PostgreSQL: the same
// program as ../mysql with PostgreSQL's driver, placeholders and dialect. A
// lottery service stores the winner of each lottery and publishes
// LotteryConcluded in one transaction, a relay delivers the events, and a
// prize sender consumes them.
//
// What changed, and why, is docs/migrating-from-forwarder.md:
//
//   - the forwarder's decorated watermill-sql publisher is
//     publisher.NewPublisher(tx, …), imported as outbox because the example's
//     local variable is called publisher;
//   - the forwarder (watermill-sql subscriber + forwarder.NewForwarder) is
//     poller.New, configured by oncebox.yaml next to this file;
//   - Google Cloud Pub/Sub is Kafka, in this process (kfake) unless
//     $KAFKA_BROKERS names a cluster;
//   - the prize sender runs on a router with oncebox's inbox, so a prize is
//     recorded once per lottery even when Kafka delivers an event twice.
//
// Each run creates its own schema in the PostgreSQL database of
// $DATABASE_URL (default: the local PostgreSQL) and drops it at the end. It
// runs the lottery for -duration, waits for every committed event, and
// prints one line:
//
//	lottery: published=N rolled_back=R delivered=N lost=0 doubled=0 phantom=0 duplicates_skipped=D latency_p50=… latency_max=…
//
// It exits 1 if an event was lost, handled twice, or delivered from a
// rolled-back transaction, and 2 on any other error.
//
//	cd examples/forwarder-swap/postgres && go run .
package main

import (
	"context"
	stdSQL "database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/examples/forwarder-swap/internal/lottery" // the program's bookkeeping
	"github.com/oncebox/watermill-oncebox/kafka"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
	outbox "github.com/oncebox/watermill-oncebox/publisher"
)

const (
	// lotteryConcludedEvent is the event type the lottery service publishes.
	// It was the Google Cloud Pub/Sub topic in Watermill's example; oncebox
	// relays it to the topic of the same name unless oncebox.yaml says
	// otherwise.
	lotteryConcludedEvent = "lottery-concluded"
	// consumerGroup is the prize sender's Kafka consumer group.
	consumerGroup = "prize-sender"
)

// LotteryConcludedEvent is the example's event: the lottery id is unique,
// so it is also what the summary counts.
type LotteryConcludedEvent struct {
	LotteryID int `json:"lottery_id"`
}

type options struct {
	dsn              string
	brokers          []string
	config           string
	duration         time.Duration
	interval         time.Duration
	errorProbability float64
	drainTimeout     time.Duration
	verbose          bool
}

func main() {
	o := options{}
	flag.StringVar(&o.dsn, "database-url", envOr("DATABASE_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL URL ($DATABASE_URL); the run creates and drops a schema of its own in that database")
	brokers := flag.String("kafka-brokers", os.Getenv("KAFKA_BROKERS"), "Kafka brokers, comma-separated ($KAFKA_BROKERS); empty: an in-process Kafka")
	flag.StringVar(&o.config, "config", "oncebox.yaml", "the oncebox configuration file")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "how long the lottery service runs")
	flag.DurationVar(&o.interval, "interval", 100*time.Millisecond, "one lottery per interval (Watermill's example: 5s)")
	flag.Float64Var(&o.errorProbability, "error-probability", 0.3, "probability that a lottery's transaction fails after publishing and rolls back")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "how long to wait for the last events after the lottery stops")
	flag.BoolVar(&o.verbose, "v", false, "log what the components do")
	flag.Parse()
	if *brokers != "" {
		o.brokers = strings.Split(*brokers, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lottery: error:", err)
		os.Exit(2)
	}
	fmt.Println(s)
	if !s.OK() {
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// run is the whole program: set-up, the relay and the prize sender, the
// lottery for o.duration, the wait for the last events, the summary.
func run(ctx context.Context, o options) (lottery.Summary, error) {
	a, cleanup, err := newApp(ctx, o)
	if err != nil {
		return lottery.Summary{}, err
	}
	defer cleanup()

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	stopPrizeSender, err := a.runPrizeSenderService(runCtx)
	if err != nil {
		return lottery.Summary{}, err
	}
	stopRelay, err := a.runRelay(runCtx)
	if err != nil {
		return lottery.Summary{}, errors.Join(err, stopPrizeSender())
	}

	lotteryCtx, stopLottery := context.WithTimeout(runCtx, o.duration)
	defer stopLottery()
	lotteryErr := a.runLotteryService(lotteryCtx, o.interval, a.persistDataAndPublishEventInTransaction)
	waitErr := a.waitForDeliveries(runCtx, o.drainTimeout)
	err = errors.Join(lotteryErr, stopRelay(), stopPrizeSender())
	if err != nil {
		return lottery.Summary{}, err
	}
	if waitErr != nil {
		// Not fatal: the summary says what is missing.
		fmt.Fprintln(os.Stderr, "lottery:", waitErr)
	}
	return a.summarize(context.Background())
}

// app holds what the services share: the database, oncebox's dialect and
// configuration, the Kafka brokers and what happened.
type app struct {
	db       *stdSQL.DB
	dialect  dialects.Dialect
	cfg      oncebox.Config
	brokers  []string
	logger   watermill.LoggerAdapter
	errorP   float64
	rand     *rand.Rand
	record   *lottery.Record
	pubConf  outbox.Config
	nextLott int
}

// newApp opens a database of its own, creates the example's tables, applies
// oncebox's migrations, loads oncebox.yaml and starts Kafka. cleanup stops
// Kafka and drops the database.
func newApp(ctx context.Context, o options) (*app, func(), error) {
	logger := watermill.LoggerAdapter(watermill.NopLogger{})
	if o.verbose {
		logger = watermill.NewStdLogger(false, false)
	}
	// The configuration first: without it nothing else makes sense, and
	// LoadConfigFile's error names the file and the key at fault.
	cfg, err := oncebox.LoadConfigFile(o.config)
	if err != nil {
		return nil, nil, err
	}
	var cleanups []func()
	cleanup := func() {
		for _, f := range slices.Backward(cleanups) {
			f()
		}
	}
	db, dropDB, err := createDB(ctx, o.dsn)
	if err != nil {
		return nil, nil, err
	}
	cleanups = append(cleanups, dropDB)
	dialect, err := postgres.New(cfg.Tables)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	// Explicit, at start-up, outside any transaction; safe when several
	// instances start at once (an advisory lock).
	if err := migrate.Migrate(ctx, sql.BeginnerFromStdSQL(db), dialect); err != nil {
		cleanup()
		return nil, nil, err
	}
	brokers := o.brokers
	if len(brokers) == 0 {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, lotteryConcludedEvent))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, cluster.Close)
		brokers = cluster.ListenAddrs()
	}
	return &app{
		db:      db,
		dialect: dialect,
		cfg:     cfg,
		brokers: brokers,
		logger:  logger,
		errorP:  o.errorProbability,
		rand:    rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)),
		record:  lottery.NewRecord(),
		pubConf: outbox.Config{Dialect: dialect, Oncebox: cfg},
	}, cleanup, nil
}

// createDB creates a schema of its own in the database of dsn, with the
// example's table and the prize sender's, and returns a pool whose
// search_path is that schema (so oncebox's tables land there too) and a
// function that drops it.
func createDB(ctx context.Context, dsn string) (*stdSQL.DB, func(), error) {
	conf, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("parse the PostgreSQL URL: %w", err)
	}
	name := "lottery_" + strings.ToLower(watermill.NewShortUUID())
	admin := stdlib.OpenDB(*conf.Copy())
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		return nil, nil, fmt.Errorf("PostgreSQL at %s: %w (is it running? make services)", conf.Host, err)
	}
	conf.RuntimeParams["search_path"] = name
	db := stdlib.OpenDB(*conf)
	drop := func() {
		db.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			fmt.Fprintln(os.Stderr, "lottery: drop schema:", err)
		}
		admin.Close()
	}
	for _, q := range []string{
		// The example's table.
		`CREATE TABLE lotteries (
			lottery_id INT NOT NULL PRIMARY KEY,
			winner VARCHAR(255) NOT NULL
		)`,
		// The prize sender's: one row per prize sent. No unique key on
		// purpose: a prize sent twice shows as two rows ("doubled").
		`CREATE TABLE prizes (
			lottery_id INT NOT NULL,
			winner VARCHAR(255) NOT NULL
		)`,
		`CREATE INDEX ON prizes (lottery_id)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			drop()
			return nil, nil, err
		}
	}
	return db, drop, nil
}

// runRelay starts oncebox's relay in place of the forwarder: it reads the
// outbox table and publishes to Kafka. stop closes it and returns the error
// Run returned, if any.
func (a *app) runRelay(ctx context.Context) (stop func() error, err error) {
	// kafka.NewPublisher rather than watermill-kafka's: a batch per round
	// trip, the ordering key as the record key, and an outage told from a
	// rejected message. It does not contact the cluster here, so the relay
	// starts during a Kafka outage too.
	kafkaPublisher, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: a.brokers}, a.logger)
	if err != nil {
		return nil, err
	}
	relay, err := poller.New(sql.BeginnerFromStdSQL(a.db), kafkaPublisher,
		poller.Config{Dialect: a.dialect, Oncebox: a.cfg}, a.logger)
	if err != nil {
		return nil, errors.Join(err, kafkaPublisher.Close())
	}
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	<-relay.Running()
	if relay.StartErr() != nil { // Run failed fast (tables not migrated, parseTime missing, …) and returns that error
		return nil, errors.Join(<-done, kafkaPublisher.Close())
	}
	return func() error {
		closeErr := relay.Close()
		return errors.Join(closeErr, <-done, kafkaPublisher.Close())
	}, nil
}

// runLotteryService picks a random user at fixed intervals and makes them
// win a lottery, until ctx ends. handle is the business transaction.
func (a *app) runLotteryService(ctx context.Context, interval time.Duration,
	handle func(ctx context.Context, lotteryID int, pickedUser string, logger watermill.LoggerAdapter) error) error {
	logger := a.logger.With(watermill.LogFields{"service": "lottery"})
	users := []string{"Mike", "Dwight", "Jim", "Pamela"}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		a.nextLott++
		lotteryID := a.nextLott
		pickedUser := users[a.rand.IntN(len(users))]
		logger := logger.With(watermill.LogFields{"user": pickedUser, "lottery_id": lotteryID})
		logger.Info("User has been picked as a winner", nil)
		// A lottery that has started runs to its commit or rollback: the
		// end of the run is taken between two lotteries only. Cancelling a
		// transaction's context while its COMMIT is on the wire leaves its
		// outcome unknown to the program (the database may commit after the
		// driver gave up waiting).
		if ctx.Err() != nil {
			return nil
		}
		err := handle(context.WithoutCancel(ctx), lotteryID, pickedUser, logger)
		switch {
		case errors.Is(err, errSimulated):
			a.record.RolledBack(lotteryID)
		case err != nil:
			return fmt.Errorf("lottery %d: %w", lotteryID, err)
		default:
			a.record.Committed(lotteryID)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// persistDataAndPublishEventInTransaction persists the winner and emits an
// event through PostgreSQL, in one transaction: the example's third
// approach, with oncebox's publisher in place of the forwarder's.
func (a *app) persistDataAndPublishEventInTransaction(ctx context.Context, lotteryID int, pickedUser string, logger watermill.LoggerAdapter) (err error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			err = tx.Commit() // a failed commit is a failed handler, not a success
			return
		}
		logger.Info("Rolling transaction back due to error", watermill.LogFields{"error": err.Error()})
		// The rollback takes the lottery row and the event with it.
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, stdSQL.ErrTxDone) {
			err = errors.Join(err, rbErr)
		}
	}()

	_, err = tx.ExecContext(ctx, `INSERT INTO lotteries (lottery_id, winner) VALUES($1, $2)`, lotteryID, pickedUser)
	if err != nil {
		return err
	}

	var publisher message.Publisher
	// The publisher joins the transaction: the event is a row of the outbox
	// table, written if and only if the transaction commits.
	publisher, err = outbox.NewPublisher(sql.TxFromStdSQL(tx), a.pubConf, logger)
	if err != nil {
		return err
	}

	event := LotteryConcludedEvent{LotteryID: lotteryID}
	payload, err := json.Marshal(event)
	if err != nil {
		return err
	}
	msg := message.NewMessage(watermill.NewULID(), payload)
	msg.SetContext(ctx)
	// The first argument is the event type; the topic comes from
	// oncebox.yaml (by default, the type's own name).
	err = publisher.Publish(lotteryConcludedEvent, msg)
	if err != nil {
		return err
	}

	// The business may still fail after the event is published: the event
	// is then rolled back with the winner.
	return a.simulateError()
}

var errSimulated = errors.New("simulated error occurred")

func (a *app) simulateError() error {
	if a.errorP > a.rand.Float64() {
		return errSimulated
	}
	return nil
}

// runPrizeSenderService listens to LotteryConcluded events and sends a prize
// to the winner: a row in prizes, written in the inbox's transaction, so the
// prize and the event's id commit together and a redelivered event sends no
// second prize. stop stops the router and returns its error.
func (a *app) runPrizeSenderService(ctx context.Context) (stop func() error, err error) {
	logger := a.logger.With(watermill.LogFields{"service": "prize_sender"})
	subConfig := kafka.RecommendedSubscriberConfig(a.brokers, consumerGroup)
	kafkaSubscriber, err := kafkawm.NewSubscriber(subConfig, logger)
	if err != nil {
		return nil, err
	}
	inbox, err := middleware.NewInbox(sql.BeginnerFromStdSQL(a.db), middleware.InboxConfig{
		Dialect: a.dialect,
		Key:     eventKey,
		Hooks:   a.record.InboxHooks(),
	}, logger)
	if err != nil {
		return nil, errors.Join(err, kafkaSubscriber.Close())
	}
	// The consuming side, composed: the poison queue (a message that keeps
	// failing is parked in the DLQ table and acked, instead of blocking the
	// subscription), Watermill's Retry, and the inbox innermost, so that
	// each attempt is a transaction of its own.
	poison, err := middleware.NewPoisonQueue(sql.BeginnerFromStdSQL(a.db), middleware.PoisonConfig{
		Dialect: a.dialect,
		Key:     eventKey,
	}, logger)
	if err != nil {
		return nil, errors.Join(err, kafkaSubscriber.Close())
	}
	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: poison, Inbox: inbox, Retry: a.cfg.Inbox.Retry}, logger)
	if err != nil {
		return nil, errors.Join(err, kafkaSubscriber.Close())
	}
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		return nil, errors.Join(err, kafkaSubscriber.Close())
	}
	router.AddMiddleware(consumer.Middleware)
	router.AddConsumerHandler("send_prize", lotteryConcludedEvent, kafkaSubscriber, func(msg *message.Message) error {
		event := LotteryConcludedEvent{}
		if err := json.Unmarshal(msg.Payload, &event); err != nil {
			return err
		}
		tx, ok := middleware.StdTxFromContext(msg.Context())
		if !ok {
			return errors.New("no inbox transaction in the handler's context")
		}
		var winner string
		// The winner is always there: it committed with the event.
		if err := tx.QueryRowContext(msg.Context(), "SELECT winner FROM lotteries WHERE lottery_id=$1", event.LotteryID).Scan(&winner); err != nil {
			return fmt.Errorf("could not get lottery %d's winner: %w", event.LotteryID, err)
		}
		if _, err := tx.ExecContext(msg.Context(), "INSERT INTO prizes (lottery_id, winner) VALUES ($1, $2)", event.LotteryID, winner); err != nil {
			return err
		}
		a.record.Handled(event.LotteryID)
		logger.Info("Sending a prize to the winner", watermill.LogFields{"winner": winner, "lottery_id": event.LotteryID})
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	<-router.Running()
	return func() error {
		closeErr := router.Close()
		return errors.Join(closeErr, <-done)
	}, nil
}

// eventKey is the inbox's deduplication key: oncebox's event id, or, for an
// event that Watermill's forwarder relayed before the swap (it carries no
// oncebox header), its message UUID, which the forwarder restores from its
// envelope. The two never collide: a UUIDv7 and a ULID differ in form.
func eventKey(msg *message.Message) string {
	if id := msg.Metadata.Get(oncebox.HeaderEventID); id != "" {
		return id
	}
	return msg.UUID
}

// waitForDeliveries waits until every committed lottery has its prize, or
// timeout.
func (a *app) waitForDeliveries(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	want := len(a.record.CommittedIDs())
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var got int
		if err := a.db.QueryRowContext(ctx, "SELECT COUNT(DISTINCT lottery_id) FROM prizes").Scan(&got); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("gave up waiting for %d prizes: %w", want, ctx.Err())
			}
			return err
		}
		if got >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting: %d of %d prizes sent", got, want)
		case <-tick.C:
		}
	}
}

// summarize compares the prizes with the committed lotteries.
func (a *app) summarize(ctx context.Context) (lottery.Summary, error) {
	rows, err := a.db.QueryContext(ctx, "SELECT lottery_id, COUNT(*) FROM prizes GROUP BY lottery_id")
	if err != nil {
		return lottery.Summary{}, err
	}
	defer rows.Close()
	prizes := map[int]int{}
	for rows.Next() {
		var id, n int
		if err := rows.Scan(&id, &n); err != nil {
			return lottery.Summary{}, err
		}
		prizes[id] = n
	}
	if err := rows.Err(); err != nil {
		return lottery.Summary{}, err
	}
	return a.record.Summary(prizes), nil
}
