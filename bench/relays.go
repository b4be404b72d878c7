package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/poller"
)

// This file holds what the relay, idle and latency scenarios share: the
// backlogs, and starting and stopping an oncebox poller or Watermill's
// forwarder.

// orderPayload is the payload of every benchmark event.
var orderPayload = []byte(`{"order_id":"0192f4a0-0000-7000-8000-000000000000","total":4200,"currency":"EUR"}`)

// backlogChunk is the number of rows per InsertEvents when filling a
// backlog.
const backlogChunk = 5000

// newEventRows builds n outbox rows of eventType as the publisher writes
// them (UUIDv7 ids; the metadata holds the caller's headers, not the event
// id and type, which live in their columns), created at at.
func newEventRows(n int, eventType string, at time.Time) ([]dialects.EventRow, error) {
	rows := make([]dialects.EventRow, n)
	for i := range rows {
		id, err := oncebox.NewEventID()
		if err != nil {
			return nil, err
		}
		rows[i] = dialects.EventRow{ID: id, EventType: eventType, Topic: eventType,
			MessageUUID: watermill.NewUUID(), Payload: orderPayload,
			Metadata: `{"tenant":"acme"}`, CreatedAt: at}
	}
	return rows, nil
}

// insertBacklog writes n events of eventType, created a second ago so that
// they are due, backlogChunk rows at a time (InsertEvents splits them
// further where the dialect takes fewer in one statement).
func insertBacklog(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect, eventType string, n int) error {
	at := time.Now().UTC().Add(-time.Second)
	for done := 0; done < n; {
		rows, err := newEventRows(min(backlogChunk, n-done), eventType, at)
		if err != nil {
			return err
		}
		if err := d.InsertEvents(ctx, db, rows); err != nil {
			return fmt.Errorf("insert backlog: %w", err)
		}
		done += len(rows)
	}
	return nil
}

// countStatus returns the number of outbox rows in status.
func countStatus(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect, status oncebox.Status) (int, error) {
	database, ok := registry.Lookup(d.Name())
	if !ok {
		return 0, fmt.Errorf("count: no database %q in the registry", d.Name())
	}
	return countWhere(ctx, db, d, " WHERE status = "+database.Placeholder(1), string(status))
}

// countRows returns the number of outbox rows, whatever their status.
func countRows(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect) (int, error) {
	return countWhere(ctx, db, d, "")
}

// countWhere returns the number of outbox rows that where (with its
// arguments) keeps.
func countWhere(ctx context.Context, db wsql.ContextExecutor, d dialects.Dialect, where string, args ...any) (int, error) {
	rows, err := db.QueryContext(ctx, "SELECT count(*) FROM "+d.Tables().Events+where, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int
	if !rows.Next() {
		return 0, errors.New("count: no row")
	}
	return n, rows.Scan(&n)
}

// Event settings of the oncebox cases.
var (
	// tunedSettings drain a backlog as fast as the database allows: big
	// batches, and 1ms between full ones.
	tunedSettings = oncebox.EventSettings{BatchSize: 1000, Polling: oncebox.PollingSettings{
		MinFixedDelay: time.Millisecond, MaxFixedDelay: 50 * time.Millisecond, Multiplier: 2}}
	// defaultSettings are the product's defaults: batch 200, delays 250ms to
	// 1m, ×1.5.
	defaultSettings = oncebox.EventSettings{}
)

// pollerConfig is the configuration of a poller instance relaying eventType
// with settings s. Strict: the one type is listed, so no discovery loop
// polls beside it (with the tuned defaults it would poll every ≤ 50ms and
// take a share of the database the drain is measured on).
func pollerConfig(d dialects.Dialect, instance int, eventType string, s oncebox.EventSettings, hooks poller.Hooks) poller.Config {
	return poller.Config{Dialect: d, EventTypes: []string{eventType}, InstanceID: fmt.Sprintf("bench-%d", instance),
		Hooks: hooks, Oncebox: oncebox.Config{Outbox: oncebox.OutboxConfig{Defaults: s, StrictEventTypes: true,
			Events: map[string]oncebox.EventSettings{eventType: {}}}}}
}

// startPollers runs one poller per configuration on db, publishing to out,
// and returns once each is running. stop closes them and returns what their
// Run returned.
func startPollers(ctx context.Context, db wsql.Beginner, out message.Publisher, configs ...poller.Config) (stop func() error, err error) {
	var started []*poller.Poller
	errc := make(chan error, len(configs))
	stop = func() error {
		var errs []error
		for _, p := range started {
			errs = append(errs, p.Close())
		}
		for range started {
			errs = append(errs, <-errc)
		}
		return errors.Join(errs...)
	}
	for _, cfg := range configs {
		p, err := poller.New(db, out, cfg, watermill.NopLogger{})
		if err != nil {
			return nil, errors.Join(err, stop())
		}
		started = append(started, p)
		go func() { errc <- p.Run(ctx) }()
		select {
		case <-p.Running():
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), stop())
		}
	}
	return stop, nil
}

// forwarderOptions are the subscriber settings of Watermill's forwarder.
type forwarderOptions struct {
	pollInterval time.Duration // 0: watermill-sql's default, 1s
	batch        int           // SubscribeBatchSize; 0: watermill-sql's default, 100
}

var (
	forwarderDefaults = forwarderOptions{}
	forwarderTuned    = forwarderOptions{pollInterval: 10 * time.Millisecond, batch: 1000}
)

// forwarderTopic is the topic (and so the table) the forwarder's publisher
// writes envelopes to and its subscriber reads: the forwarder's default.
const forwarderTopic = "forwarder_topic"

// wmDB is where Watermill's forwarder runs: a database and watermill-sql's
// schema and offsets adapters for it, with the tables in the bench schema so
// that dropping the schema removes them too.
type wmDB struct {
	db      wsql.Beginner
	schema  func(batch int) wsql.SchemaAdapter // batch: SubscribeBatchSize, 0 for the default
	offsets wsql.OffsetsAdapter
}

// pgWM is watermill-sql's PostgreSQL adapters over pool.
func pgWM(pool *pgxpool.Pool) wmDB {
	return wmDB{db: wsql.BeginnerFromPgx(pool),
		schema: func(batch int) wsql.SchemaAdapter { return wmSchema(batch) }, offsets: wmOffsets()}
}

// wmSchema is watermill-sql's PostgreSQL schema adapter with its tables in
// the bench schema.
func wmSchema(batch int) wsql.DefaultPostgreSQLSchema {
	return wsql.DefaultPostgreSQLSchema{
		SubscribeBatchSize:        batch,
		GenerateMessagesTableName: func(topic string) string { return benchSchema + `."watermill_` + topic + `"` },
	}
}

// wmOffsets is watermill-sql's PostgreSQL offsets adapter, in the bench schema.
func wmOffsets() wsql.DefaultPostgreSQLOffsetsAdapter {
	return wsql.DefaultPostgreSQLOffsetsAdapter{
		GenerateMessagesOffsetsTableName: func(topic string) string {
			return benchSchema + `."watermill_offsets_` + topic + `"`
		},
	}
}

// newForwarderSubscriber is the forwarder's input: watermill-sql's
// subscriber on w with opts.
func newForwarderSubscriber(w wmDB, opts forwarderOptions) (*wsql.Subscriber, error) {
	return wsql.NewSubscriber(w.db, wsql.SubscriberConfig{
		SchemaAdapter:    w.schema(opts.batch),
		OffsetsAdapter:   w.offsets,
		PollInterval:     opts.pollInterval,
		InitializeSchema: true,
	}, watermill.NopLogger{})
}

// initForwarderSchema creates watermill-sql's tables of the forwarder's topic
// in the bench schema of w's database.
func initForwarderSchema(w wmDB) error {
	sub, err := newForwarderSubscriber(w, forwarderDefaults)
	if err != nil {
		return err
	}
	defer sub.Close()
	return sub.SubscribeInitialize(forwarderTopic)
}

// forwarderPublisher is how an application writes through the forwarder:
// forwarder.NewPublisher over watermill-sql's publisher with schema on db (a
// transaction, or the database for a backlog). The tables must exist.
func forwarderPublisher(db wsql.ContextExecutor, schema wsql.SchemaAdapter) (message.Publisher, error) {
	pub, err := wsql.NewPublisher(db, wsql.PublisherConfig{SchemaAdapter: schema}, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	return forwarder.NewPublisher(pub, forwarder.PublisherConfig{}), nil
}

// insertForwarderBacklog writes n messages through the forwarder's publisher
// on w, 1,000 per Publish (one INSERT, one transaction each).
func insertForwarderBacklog(w wmDB, eventType string, n int) error {
	pub, err := forwarderPublisher(w.db, w.schema(0))
	if err != nil {
		return err
	}
	for done := 0; done < n; {
		msgs := make([]*message.Message, min(1000, n-done))
		for i := range msgs {
			msgs[i] = message.NewMessage(watermill.NewUUID(), orderPayload)
			msgs[i].Metadata.Set("tenant", "acme")
		}
		if err := pub.Publish(eventType, msgs...); err != nil {
			return fmt.Errorf("forwarder backlog: %w", err)
		}
		done += len(msgs)
	}
	return nil
}

// startForwarder runs Watermill's forwarder from the bench schema of w's
// database to out and returns once it is running. stop closes it and returns
// what Run returned.
func startForwarder(ctx context.Context, w wmDB, out message.Publisher, opts forwarderOptions) (stop func() error, err error) {
	sub, err := newForwarderSubscriber(w, opts)
	if err != nil {
		return nil, err
	}
	f, err := forwarder.NewForwarder(sub, out, watermill.NopLogger{}, forwarder.Config{})
	if err != nil {
		return nil, errors.Join(err, sub.Close())
	}
	errc := make(chan error, 1)
	go func() { errc <- f.Run(ctx) }()
	stop = func() error { return errors.Join(f.Close(), <-errc, sub.Close()) }
	select {
	case <-f.Running():
		return stop, nil
	case err := <-errc:
		return nil, errors.Join(fmt.Errorf("forwarder stopped at start-up: %v", err), sub.Close())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), stop())
	}
}
