// Package allinone runs the whole orders example in one process for a
// bounded time — the orders API with its relay, the shipping consumer and
// the traffic generator, on Kafka (in-process when no brokers are given) or
// RabbitMQ — and then checks the outcome against the two services'
// databases: every order the API created has exactly one shipment, the
// stock reserved matches the quantities ordered, and the poison events
// injected were parked in the DLQ table.
//
// It builds the services from the same packages as the separate commands
// (internal/api, internal/shipping, internal/traffic, internal/brokers).
// Each run uses schemas, a topic (queue) and a consumer group of its own,
// suffixed with the run id, and removes them at the end unless told to keep
// them, so runs never see each other's data.
package allinone

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/cache/rediscache"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/api"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/brokers"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/cli"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/shipping"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/traffic"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// Options configure a run.
type Options struct {
	// Broker is brokers.Kafka or brokers.RabbitMQ.
	Broker string
	// KafkaBrokers are the brokers of an existing cluster. Empty: an
	// in-process Kafka (kfake) for the length of the run.
	KafkaBrokers []string
	// AMQPURL is the RabbitMQ to use with Broker rabbitmq.
	AMQPURL string
	// DatabaseURL is the PostgreSQL both services use (each in its schema).
	DatabaseURL string
	// RedisAddr, if set, puts a Redis cache in front of the shipping inbox.
	RedisAddr string
	// ConfigPath is the oncebox.yaml to load.
	ConfigPath string
	// RunID suffixes the schemas (orders_api_<id>, shipping_<id>), the
	// topic (<topic>_<id>) and the consumer group. Lower-case letters,
	// digits and underscores, at most 24. Default: random.
	RunID string
	// Keep leaves the schemas, the queue or topic and the cache keys in
	// place at the end, for inspection.
	Keep bool
	// HTTPAddr is where the API listens. Default 127.0.0.1:0 (a free port).
	HTTPAddr string
	// Traffic is the load; its URL is set to the API's.
	Traffic traffic.Config
	// Poison is the number of malformed order-created events written to
	// the outbox beside the traffic; the shipping service must park each in
	// its DLQ table, after its retries.
	Poison int
	// Duplicates is the number of events sent to the broker a second time
	// once everything is shipped, as a relay that crashed between the
	// broker's confirm and marking its batch PROCESSED would; the shipping
	// inbox must drop each.
	Duplicates int
	// DrainTimeout bounds the wait, after the traffic, for every order to
	// be shipped. Default 30s.
	DrainTimeout time.Duration
	// Logger receives the services' logs. Default: none.
	Logger watermill.LoggerAdapter
	// Out receives the progress lines. Default: none.
	Out io.Writer
}

var runIDRE = regexp.MustCompile(`^[a-z0-9_]{1,24}$`)

// Validate reports every option out of range, naming its flag. Run checks
// the same before it starts anything.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o Options) withDefaults() (Options, error) {
	if o.RunID == "" {
		b := make([]byte, 4)
		if _, err := rand.Read(b); err != nil {
			return o, err
		}
		o.RunID = hex.EncodeToString(b)
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:0"
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = watermill.NopLogger{}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	var errs []error
	if !runIDRE.MatchString(o.RunID) {
		errs = append(errs, fmt.Errorf("-run-id %q: want 1 to 24 lower-case letters, digits or underscores", o.RunID))
	}
	if o.Poison < 0 || o.Poison > 100 {
		errs = append(errs, fmt.Errorf("-poison %d: want 0 to 100", o.Poison))
	}
	if o.Duplicates < 0 || o.Duplicates > 10_000 {
		errs = append(errs, fmt.Errorf("-duplicates %d: want 0 to 10000", o.Duplicates))
	}
	switch o.Broker {
	case brokers.Kafka:
	case brokers.RabbitMQ:
		errs = append(errs, brokers.Config{Kind: o.Broker, AMQPURL: o.AMQPURL}.Validate())
	default:
		errs = append(errs, fmt.Errorf("broker %q: want %q or %q (-broker, $BROKER)", o.Broker, brokers.Kafka, brokers.RabbitMQ))
	}
	if o.DatabaseURL == "" {
		errs = append(errs, errors.New("-database-url / $DATABASE_URL is empty"))
	}
	t := o.Traffic
	t.URL = "http://127.0.0.1:1" // set later; validate the rest now
	if err := t.Validate(); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// Report is the outcome of a run.
type Report struct {
	// RunID and Broker identify the run.
	RunID, Broker string
	// Schemas and Topic are where the run's data was.
	APISchema, ShippingSchema, Topic string
	// Traffic is the traffic generator's summary.
	Traffic traffic.Summary
	// Orders is the number of orders in the API's schema; Created the
	// number of 201 responses; MissingInAPI the 201s without an order row.
	Orders, Created, MissingInAPI int
	// Shipped is the number of orders with exactly one shipment; Lost with
	// none; Doubled with more than one; Phantom counts shipments of orders
	// the API never wrote.
	Shipped, Lost, Doubled, Phantom int
	// StockOrdered is the sum of the quantities of every order;
	// StockReserved the sum the shipping service reserved. Equal when every
	// order was handled exactly once.
	StockOrdered, StockReserved int64
	// PoisonSent is the number of malformed events written; Parked the
	// messages the shipping service's poison queue stored.
	PoisonSent, Parked int
	// DuplicatesSent is the number of events sent a second time; the
	// inbox's drops are in Inbox.Duplicates.
	DuplicatesSent int
	// Relayed is the number of events the broker confirmed to the relay.
	Relayed int64
	// OutboxLeft is the number of the API's outbox rows not yet PROCESSED
	// when the run stopped.
	OutboxLeft int
	// Inbox is what the shipping inbox did.
	Inbox shipping.Stats
	// MetricsConsumed is oncebox_inbox_consumed_total as the shipping
	// service's GET /metrics served it at the end of the run.
	MetricsConsumed float64
	// Drain is how long it took, after the traffic, until every order was
	// shipped.
	Drain time.Duration
}

// Problems lists what went wrong; empty when the run is clean.
func (r Report) Problems() []string {
	var p []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			p = append(p, fmt.Sprintf(format, args...))
		}
	}
	add(r.Created == 0, "no order was created")
	add(r.Lost > 0, "%d orders have no shipment (lost)", r.Lost)
	add(r.Doubled > 0, "%d orders have more than one shipment (doubled)", r.Doubled)
	add(r.Phantom > 0, "%d shipments are for orders the API never wrote", r.Phantom)
	add(r.MissingInAPI > 0, "%d orders answered 201 are not in the API's table", r.MissingInAPI)
	add(r.StockReserved != r.StockOrdered, "stock reserved %d, ordered %d", r.StockReserved, r.StockOrdered)
	add(r.Parked != r.PoisonSent, "%d poison events sent, %d parked", r.PoisonSent, r.Parked)
	add(r.Inbox.Duplicates < int64(r.DuplicatesSent), "%d duplicates sent, the inbox saw %d", r.DuplicatesSent, r.Inbox.Duplicates)
	add(r.Traffic.Unexpected() > 0, "the API answered %d requests unexpectedly (5xx, invalid accepted or valid rejected)", r.Traffic.Unexpected())
	add(r.Traffic.TransportErrors > 0, "%d requests got no response", r.Traffic.TransportErrors)
	add(r.MetricsConsumed != float64(r.Inbox.Consumed), "GET /metrics says %g consumed, the inbox counted %d",
		r.MetricsConsumed, r.Inbox.Consumed)
	return p
}

// OK reports a clean run: nothing lost, doubled or unexpected.
func (r Report) OK() bool { return len(r.Problems()) == 0 }

// String is the final summary line.
func (r Report) String() string {
	return fmt.Sprintf("broker=%s orders=%d created=%d shipped=%d lost=%d doubled=%d phantom=%d poison=%d parked=%d "+
		"stock_ordered=%d stock_reserved=%d relayed=%d outbox_left=%d duplicates_sent=%d duplicates_skipped=%d (from cache %d) drain=%s",
		r.Broker, r.Orders, r.Created, r.Shipped, r.Lost, r.Doubled, r.Phantom, r.PoisonSent, r.Parked,
		r.StockOrdered, r.StockReserved, r.Relayed, r.OutboxLeft, r.DuplicatesSent, r.Inbox.Duplicates, r.Inbox.DuplicatesFromCache,
		r.Drain.Round(time.Millisecond))
}

// Run runs the example and checks it. The error is about the run itself
// (a service that cannot start, a database that went away); the outcome of
// the check is in the Report (see Report.OK). Everything the run created is
// removed before Run returns, unless Options.Keep.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	o, err = o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	rep = Report{RunID: o.RunID, Broker: o.Broker, APISchema: "orders_api_" + o.RunID, ShippingSchema: "shipping_" + o.RunID,
		PoisonSent: o.Poison}
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, "all-in-one: "+format+"\n", args...) }

	cfg, baseTopic, err := cli.LoadOncebox(o.ConfigPath, "")
	if err != nil {
		return rep, err
	}
	rep.Topic = baseTopic + "_" + o.RunID
	cfg = events.WithTopic(cfg, rep.Topic)

	// Undo everything at the end, last created first.
	var cleanups []func() error
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			if cerr := cleanups[i](); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
	}()
	cleanup := func(f func() error) { cleanups = append(cleanups, f) }

	// The databases: one pool per service, as two deployments would have.
	apiPool, err := pgdb.Connect(ctx, o.DatabaseURL)
	if err != nil {
		return rep, err
	}
	cleanup(func() error { apiPool.Close(); return nil })
	shipPool, err := pgdb.Connect(ctx, o.DatabaseURL)
	if err != nil {
		return rep, err
	}
	cleanup(func() error { shipPool.Close(); return nil })
	if !o.Keep {
		cleanup(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return errors.Join(pgdb.DropSchema(ctx, apiPool, rep.APISchema), pgdb.DropSchema(ctx, apiPool, rep.ShippingSchema))
		})
	}

	// The broker.
	bcfg := brokers.Config{Kind: o.Broker, KafkaBrokers: o.KafkaBrokers, AMQPURL: o.AMQPURL}
	switch {
	case o.Broker == brokers.Kafka && len(o.KafkaBrokers) == 0:
		cluster, err := brokers.StartKafka(3, rep.Topic)
		if err != nil {
			return rep, err
		}
		cleanup(func() error { cluster.Close(); return nil })
		bcfg.KafkaBrokers = cluster.ListenAddrs()
		say("in-process Kafka at %v, topic %s", bcfg.KafkaBrokers, rep.Topic)
	case o.Broker == brokers.Kafka:
		if err := brokers.EnsureKafkaTopic(o.KafkaBrokers, rep.Topic, 3); err != nil {
			return rep, err
		}
		if !o.Keep {
			cleanup(func() error { return brokers.DeleteKafkaTopic(o.KafkaBrokers, rep.Topic) })
		}
		say("Kafka at %v, topic %s", o.KafkaBrokers, rep.Topic)
	default:
		if err := brokers.PingRabbitMQ(o.AMQPURL); err != nil {
			return rep, err
		}
		if !o.Keep {
			cleanup(func() error { return brokers.DeleteQueue(o.AMQPURL, rep.Topic) })
		}
		say("RabbitMQ, queue %s", rep.Topic)
	}
	say("PostgreSQL schemas %s and %s", rep.APISchema, rep.ShippingSchema)

	// The relay's publisher (it declares the RabbitMQ queue) and the
	// consumer's subscriber.
	relayPub, err := brokers.NewPublisher(bcfg, []string{rep.Topic}, o.Logger)
	if err != nil {
		return rep, err
	}
	cleanup(relayPub.Close)
	sub, err := brokers.NewSubscriber(bcfg, "shipping_"+o.RunID, o.Logger)
	if err != nil {
		return rep, err
	}
	cleanup(sub.Close) // the router closes it too; a second Close is harmless

	var inboxCache cache.Cache
	if o.RedisAddr != "" {
		rc := redis.NewClient(&redis.Options{Addr: o.RedisAddr, ContextTimeoutEnabled: true})
		cleanup(rc.Close)
		name := "shipping_" + o.RunID
		inboxCache, err = rediscache.New(rc, rediscache.Config{Name: name, TTL: cfg.Inbox.Cache.TTL})
		if err != nil {
			return rep, err
		}
		if !o.Keep {
			cleanup(func() error { return deleteKeys(rc, name+":*") })
		}
		say("Redis inbox cache at %s", o.RedisAddr)
	}

	// The two services.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ship, err := shipping.New(ctx, shipping.Config{Pool: shipPool, Schema: rep.ShippingSchema, Oncebox: cfg,
		Subscriber: sub, Relay: relayPub, Cache: inboxCache, Logger: o.Logger})
	if err != nil {
		return rep, err
	}
	relayed := &relayCounter{}
	srv, err := api.New(ctx, api.Config{Pool: apiPool, Schema: rep.APISchema, Oncebox: cfg, Relay: relayPub,
		RelayHooks: relayed, Logger: o.Logger})
	if err != nil {
		return rep, err
	}
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return rep, fmt.Errorf("listen on %s: %w", o.HTTPAddr, err)
	}
	var wg sync.WaitGroup
	svcErrs := make(chan error, 2)
	wg.Add(2)
	// A service that fails stops the other one, and the run.
	goService := func(name string, run func() error) {
		defer wg.Done()
		err := run()
		if err != nil {
			stop()
		}
		svcErrs <- wrap(name, err)
	}
	go goService("shipping", func() error { return ship.Run(runCtx, nil) })
	go goService("orders-api", func() error { return srv.Serve(runCtx, ln) })
	stopped := false
	stopServices := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stop()
		wg.Wait()
		close(svcErrs)
		var errs []error
		for e := range svcErrs {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	}
	cleanup(stopServices) // after a failure; the normal path stops them below
	for _, c := range []<-chan struct{}{srv.Ready(), ship.Running()} {
		select {
		case <-c:
		case <-runCtx.Done():
			return rep, fmt.Errorf("the services did not start: %w", errors.Join(ctx.Err(), stopServices()))
		}
	}
	url := "http://" + ln.Addr().String()
	say("orders API at %s (relay in-process), shipping consuming %s", url, rep.Topic)

	// The exercise runs on runCtx: a service that fails ends it early.
	f := &flow{o: o, rep: &rep, cfg: cfg, apiPool: apiPool, srv: srv, ship: ship, relayPub: relayPub, relayed: relayed, url: url, say: say}
	if err := f.exercise(runCtx); err != nil {
		if ctx.Err() == nil && runCtx.Err() != nil {
			if svcErr := stopServices(); svcErr != nil {
				return rep, svcErr // the cause, rather than "context canceled"
			}
		}
		return rep, err
	}
	if err := stopServices(); err != nil {
		return rep, err
	}
	rep.Relayed = relayed.n.Load()
	rep.Inbox = ship.Stats()
	rep.MetricsConsumed = scrapeConsumed(ship.Handler())
	checkCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.check(checkCtx); err != nil {
		return rep, err
	}
	return rep, nil
}

// flow is a run once its services are up.
type flow struct {
	o        Options
	rep      *Report
	cfg      oncebox.Config
	apiPool  *pgxpool.Pool // the check reads both schemas through it
	srv      *api.Server
	ship     *shipping.Service
	relayPub message.Publisher
	relayed  *relayCounter
	url      string
	say      func(format string, args ...any)
}

// exercise writes the poison events, runs the traffic, waits for every order
// to be shipped, then sends duplicates and waits for the inbox to drop them.
func (f *flow) exercise(ctx context.Context) error {
	o, rep, ship, say := f.o, f.rep, f.ship, f.say
	var err error
	if o.Poison > 0 {
		if err := writePoison(ctx, f.apiPool, f.srv, f.cfg, o.Poison); err != nil {
			return err
		}
		say("wrote %d malformed order-created event(s): the shipping service retries, then parks each (the log shows its errors)", o.Poison)
	}

	tc := o.Traffic
	tc.URL = f.url
	tc.Progress = func(s traffic.Summary) {
		say("%4.1fs sent=%d 201=%d 4xx=%d 5xx=%d relayed=%d consumed=%d",
			s.Elapsed.Seconds(), s.Sent, s.Created, s.Status4xx, s.Status5xx, f.relayed.n.Load(), ship.Stats().Consumed)
	}
	say("traffic: %.0f requests/s for %s, %.0f%% invalid", tc.Rate, tc.Duration, tc.InvalidFraction*100)
	rep.Traffic, err = traffic.Run(ctx, tc)
	if err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	say("traffic: %s", rep.Traffic)

	// Wait until every order is shipped and every poison event parked.
	drainStart := time.Now()
	if err := f.drain(ctx); err != nil {
		return err
	}
	rep.Drain = time.Since(drainStart)

	if o.Duplicates > 0 {
		rep.DuplicatesSent, err = resend(ctx, f.apiPool, f.srv, f.relayPub, rep.Topic, o.Duplicates)
		if err != nil {
			return err
		}
		say("sent %d delivered events to the broker again (a relay that crashed before marking them PROCESSED)", rep.DuplicatesSent)
		waitFor(ctx, o.DrainTimeout, func() bool { return ship.Stats().Duplicates >= int64(rep.DuplicatesSent) })
		say("the shipping inbox dropped %d duplicates", ship.Stats().Duplicates)
	}
	return nil
}

func wrap(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// writePoison writes n order-created events the shipping service cannot
// handle (an order id that is not one), each in its own transaction, the way
// a buggy producer would.
func writePoison(ctx context.Context, pool *pgxpool.Pool, srv *api.Server, cfg oncebox.Config, n int) error {
	pcfg := publisher.Config{Dialect: srv.Dialect(), Oncebox: cfg}
	for i := range n {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), pcfg, nil)
			if err != nil {
				return err
			}
			_, err = publisher.PublishJSON(ctx, pub, events.OrderCreatedType,
				map[string]any{"order_id": fmt.Sprintf("poison-%d", i), "items": []events.Item{{SKU: "SKU-001", Qty: 1}}},
				publisher.WithKey(fmt.Sprintf("poison-%d", i)))
			return err
		})
		if err != nil {
			return fmt.Errorf("write a poison event: %w", err)
		}
	}
	return nil
}

// resend sends the events of up to n orders, which the relay already
// delivered, to topic again with their event ids, the way the relay's
// recovery would after a crash between the broker's confirm and the
// finalize.
func resend(ctx context.Context, pool *pgxpool.Pool, srv *api.Server, pub message.Publisher, topic string, n int) (int, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, event_type, message_uuid, payload, coalesce(partition_key, '')
FROM `+srv.Dialect().Tables().Events+` WHERE status = 'PROCESSED' AND partition_key NOT LIKE 'poison-%'
ORDER BY id LIMIT $1`, n)
	if err != nil {
		return 0, fmt.Errorf("read delivered events: %w", err)
	}
	var msgs []*message.Message
	for rows.Next() {
		var id, eventType, uuid, key string
		var payload []byte
		if err := rows.Scan(&id, &eventType, &uuid, &payload, &key); err != nil {
			rows.Close()
			return 0, fmt.Errorf("read delivered events: %w", err)
		}
		m := message.NewMessage(uuid, payload)
		m.Metadata.Set(oncebox.HeaderEventID, id)
		m.Metadata.Set(oncebox.HeaderEventType, eventType)
		oncebox.SetKey(m, key)
		msgs = append(msgs, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read delivered events: %w", err)
	}
	if len(msgs) == 0 {
		return 0, nil
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		return 0, fmt.Errorf("send duplicates: %w", err)
	}
	return len(msgs), nil
}

// waitFor polls done every 50ms until it holds, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, done func() bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// drain waits until every order of the API's schema has a shipment and
// every poison event was parked, or DrainTimeout passes (then the check
// reports what is missing).
func (f *flow) drain(ctx context.Context) error {
	o, rep, pool, say := f.o, f.rep, f.apiPool, f.say
	deadline := time.Now().Add(o.DrainTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastSay := time.Now()
	dlq := f.ship.Dialect().Tables().DLQ
	for {
		var orders, shipped, parked int
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+rep.APISchema+`.orders),
       (SELECT count(DISTINCT order_id) FROM `+rep.ShippingSchema+`.shipments),
       (SELECT count(*) FROM `+dlq+` WHERE source = 'consumer')`).Scan(&orders, &shipped, &parked)
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if shipped >= orders && parked >= o.Poison {
			say("drained: %d orders shipped, %d poison event(s) parked", shipped, parked)
			return nil
		}
		if time.Now().After(deadline) {
			say("gave up waiting after %s: %d of %d orders shipped, %d of %d poison events parked",
				o.DrainTimeout, shipped, orders, parked, o.Poison)
			return nil
		}
		if time.Since(lastSay) >= time.Second {
			lastSay = time.Now()
			say("draining: %d of %d orders shipped, %d of %d poison events parked", shipped, orders, parked, o.Poison)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// check compares the two services' tables and fills rep.
func (f *flow) check(ctx context.Context) error {
	pool, rep := f.apiPool, f.rep
	a, s := rep.APISchema, rep.ShippingSchema
	rep.Created = len(rep.Traffic.CreatedIDs)

	orders := map[string]bool{}
	if err := scanRows(ctx, pool, `SELECT id::text FROM `+a+`.orders`, func(r pgx.Rows) error {
		var id string
		err := r.Scan(&id)
		orders[id] = true
		return err
	}); err != nil {
		return err
	}
	rep.Orders = len(orders)
	shipments := map[string]int{}
	if err := scanRows(ctx, pool, `SELECT order_id::text, count(*) FROM `+s+`.shipments GROUP BY order_id`, func(r pgx.Rows) error {
		var id string
		var n int
		err := r.Scan(&id, &n)
		shipments[id] = n
		return err
	}); err != nil {
		return err
	}
	// Every order the API wrote (a superset of the 201s) must have exactly
	// one shipment.
	for _, id := range rep.Traffic.CreatedIDs {
		if !orders[id] {
			rep.MissingInAPI++
		}
	}
	for id := range orders {
		switch shipments[id] {
		case 0:
			rep.Lost++
		case 1:
			rep.Shipped++
		default:
			rep.Doubled++
		}
	}
	for id := range shipments {
		if !orders[id] {
			rep.Phantom++
		}
	}
	err := pool.QueryRow(ctx, `SELECT
    (SELECT coalesce(sum(qty), 0) FROM `+a+`.order_items),
    (SELECT coalesce(sum(reserved), 0) FROM `+s+`.stock),
    (SELECT count(*) FROM `+f.ship.Dialect().Tables().DLQ+` WHERE source = 'consumer'),
    (SELECT count(*) FROM `+f.srv.Dialect().Tables().Events+` WHERE status <> 'PROCESSED')`).
		Scan(&rep.StockOrdered, &rep.StockReserved, &rep.Parked, &rep.OutboxLeft)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

func scanRows(ctx context.Context, pool *pgxpool.Pool, sql string, f func(pgx.Rows) error) error {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// deleteKeys deletes the Redis keys matching pattern.
func deleteKeys(rc *redis.Client, pattern string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rc.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			if err := rc.Del(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("delete the cache keys: %w", err)
			}
			keys = keys[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("delete the cache keys: %w", err)
	}
	if len(keys) > 0 {
		if err := rc.Del(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("delete the cache keys: %w", err)
		}
	}
	return nil
}

// relayCounter counts the events the relay had confirmed.
type relayCounter struct {
	poller.NopHooks
	n atomic.Int64
}

// Sent implements poller.Hooks.
func (c *relayCounter) Sent(_ string, ids []oncebox.EventID) { c.n.Add(int64(len(ids))) }

// scrapeConsumed reads oncebox_inbox_consumed_total, summed over its
// namespaces, from the GET /metrics of h.
func scrapeConsumed(h http.Handler) float64 {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	total := 0.0
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if !strings.HasPrefix(line, "oncebox_inbox_consumed_total{") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}
