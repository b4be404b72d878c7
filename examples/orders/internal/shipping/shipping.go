// Package shipping is the consuming service of the orders example. It
// subscribes to the order-created events with a Watermill router whose
// middleware is service.Middleware: oncebox's poison queue, Watermill's
// Retry and oncebox's inbox, in that order (see docs/inbox.md), built by
// service.New from oncebox.yaml. For each new order it reserves
// stock, creates a shipment and marks the order "shipment_pending" — in the
// inbox's transaction, so the effects and the event id commit together and a
// redelivered event changes nothing.
//
// The service owns its own schema (default "shipping"): its tables and its
// copy of oncebox's tables. It never reads the orders service's tables.
// Beside the router, service.Run runs the inbox clean-up, the DLQ retry
// (a parked message an operator retried with `oncebox dlq retry` goes back
// to the outbox of this schema) and the relay that sends it back to its
// topic, where the inbox handles it.
package shipping

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/service"
)

// DefaultSchema is the PostgreSQL schema the shipping service owns.
const DefaultSchema = "shipping"

// HandlerName is the router handler's name, stored with each message the
// poison queue parks.
const HandlerName = "ship-order"

// Config configures a Service.
type Config struct {
	// Pool is the service's database. Required. The Service does not close
	// it. Size it for the messages handled at once: the inbox holds one
	// connection per message for the length of its handler.
	Pool *pgxpool.Pool
	// Schema holds the service's tables and its oncebox tables. Default
	// DefaultSchema.
	Schema string
	// Oncebox is the oncebox configuration (oncebox.yaml): the topic of
	// events.OrderCreatedType and inbox.clean-up.
	Oncebox oncebox.Config
	// Subscriber delivers the events. Required. The router closes it.
	Subscriber message.Subscriber
	// Relay publishes to the broker the events come from: the relay of this
	// service sends the retried DLQ rows back to their topic with it.
	// Required. The Service does not close it.
	Relay message.Publisher
	// Cache, if set, answers "already processed?" before the inbox table
	// (rediscache.New for a Redis shared by the instances).
	Cache cache.Cache
	// MaxRetries is how many times Retry runs a failed handler again before
	// the poison queue parks the message. Default 3.
	MaxRetries int
	// RetryInterval is Retry's first wait, doubled at each retry. Default
	// 100ms.
	RetryInterval time.Duration
	// CloseTimeout bounds how long handlers in flight get to finish at
	// shutdown. Default 30s.
	CloseTimeout time.Duration
	// Logger logs. Default: nothing.
	Logger watermill.LoggerAdapter
}

// Stats counts what the inbox did since the Service started.
type Stats struct {
	// Consumed is the number of events handled and committed.
	Consumed int64
	// Duplicates is the number of deliveries dropped as already processed,
	// DuplicatesFromCache of them answered by the cache.
	Duplicates, DuplicatesFromCache int64
	// Failed is the number of failed handler runs (each retry counts).
	Failed int64
}

// Service is the shipping consumer. Build it with New, run it with Run.
type Service struct {
	cfg     Config
	pg      *postgres.Dialect
	topic   string
	router  *message.Router
	oncebox *service.Service
	logger  watermill.LoggerAdapter
	stats   statsHooks
	reg     *prometheus.Registry // served on GET /metrics
	running chan struct{}
	started atomic.Bool
}

// New prepares the service's schema (see package pgdb), then builds its
// oncebox (service.New: inbox, poison queue, retry, inbox clean-up, DLQ
// retry and relay) and the router.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Pool == nil {
		return nil, errors.New("shipping: Config.Pool is nil")
	}
	if cfg.Subscriber == nil {
		return nil, errors.New("shipping: Config.Subscriber is nil")
	}
	if cfg.Relay == nil {
		return nil, errors.New("shipping: Config.Relay is nil: the retried DLQ rows go back to the broker through it")
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 3
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 100 * time.Millisecond
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = watermill.NopLogger{}
	}
	topic, err := events.Topic(cfg.Oncebox)
	if err != nil {
		return nil, fmt.Errorf("shipping: oncebox configuration: %w", err)
	}
	pg, err := pgdb.Setup(ctx, cfg.Pool, cfg.Schema, schemaDDL(cfg.Schema))
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, pg: pg, topic: topic, running: make(chan struct{}),
		logger: cfg.Logger.With(watermill.LogFields{"service": "shipping"})}

	s.reg = prometheus.NewRegistry()
	if s.stats.prom, err = metrics.NewInboxHooks(s.reg); err != nil {
		return nil, err
	}
	// oncebox.yaml is shared with orders-api: what makes this service the
	// consumer, and where its tables are, is set here.
	ocfg := cfg.Oncebox
	ocfg.Tables.Schema = cfg.Schema
	ocfg.Inbox.Enabled = true
	ocfg.Inbox.Retry = retryConfig(cfg)
	opts := []service.Option{service.WithDialect(pg), service.WithRelay(cfg.Relay),
		service.WithHooks(service.Hooks{Inbox: &s.stats, OnInboxCleanUp: s.stats.prom.OnCleanerRun})}
	if cfg.Cache != nil {
		ocfg.Inbox.Cache.Enabled = true
		if ocfg.Inbox.Cache.CacheName == "" {
			ocfg.Inbox.Cache.CacheName = cfg.Schema
		}
		opts = append(opts, service.WithInboxCache(func(oncebox.CacheConfig) (cache.Cache, error) { return cfg.Cache, nil }))
	}
	if s.oncebox, err = service.New(wsql.BeginnerFromPgx(cfg.Pool), ocfg, cfg.Logger, opts...); err != nil {
		return nil, err
	}
	s.router, err = message.NewRouter(message.RouterConfig{CloseTimeout: cfg.CloseTimeout}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	// The poison queue (parks what Retry gave up on, then acks it), Retry,
	// and the inbox (every attempt a fresh transaction), in that order.
	s.router.AddMiddleware(s.oncebox.Middleware)
	s.router.AddConsumerHandler(HandlerName, topic, cfg.Subscriber, s.shipOrder)
	return s, nil
}

// RetryPolicy is the Retry middleware of the service: cfg.MaxRetries
// retries waiting cfg.RetryInterval, then twice as long each time.
// MaxInterval must be set for that: without it Watermill's backoff keeps
// every wait at InitialInterval (100, 100, 100 ms), whatever Multiplier says.
func RetryPolicy(cfg Config) wmw.Retry { return middleware.RetryPolicy(retryConfig(cfg), cfg.Logger) }

func retryConfig(cfg Config) oncebox.RetryConfig {
	return oncebox.RetryConfig{MaxRetries: oncebox.Int(cfg.MaxRetries), InitialInterval: cfg.RetryInterval,
		Multiplier: 2, MaxInterval: cfg.RetryInterval << cfg.MaxRetries}
}

// Dialect is the oncebox dialect of the service's schema (its tables'
// names), for tools and checks.
func (s *Service) Dialect() *postgres.Dialect { return s.pg }

// Topic is the topic (queue) the service consumes.
func (s *Service) Topic() string { return s.topic }

// Running is closed once the router runs its handler.
func (s *Service) Running() <-chan struct{} { return s.running }

// Stats returns what the inbox did so far.
func (s *Service) Stats() Stats {
	return Stats{Consumed: s.stats.consumed.Load(), Duplicates: s.stats.duplicates.Load(),
		DuplicatesFromCache: s.stats.cached.Load(), Failed: s.stats.failed.Load()}
}

// Run consumes until ctx ends, running oncebox's background work beside
// (inbox clean-up, DLQ retry, the relay of retried messages), and
// serves Handler on ln when ln is not nil. Then it stops gracefully: the
// router stops taking messages and gives the handlers in flight
// CloseTimeout to finish (an interrupted one rolls back and its message is
// redelivered), then the clean-up and the HTTP server stop. It returns nil
// after a clean stop. Run may be called once.
func (s *Service) Run(ctx context.Context, ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		if ln != nil {
			_ = ln.Close()
		}
		return errors.New("shipping: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	goRun := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	// The router and the cleaner are stopped by Close, not by ctx, so that
	// the handlers in flight finish their transactions.
	routerDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := s.router.Run(context.WithoutCancel(ctx))
		close(routerDone)
		if err == nil && ctx.Err() == nil {
			// Watermill closes the router when every handler ended, which
			// happens when the subscriber gave up.
			err = errors.New("stopped on its own: the subscription ended")
		}
		if err != nil {
			errc <- fmt.Errorf("router: %w", err)
			cancel()
		}
	}()
	goRun("oncebox", func() error { return s.oncebox.Run(context.WithoutCancel(ctx)) })
	var srv *http.Server
	if ln != nil {
		srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
		goRun("http", func() error { return srv.Serve(ln) })
	}
	select {
	case <-s.router.Running():
		close(s.running)
		s.logger.Info("Shipping service running", watermill.LogFields{"topic": s.topic, "schema": s.cfg.Schema})
	case <-ctx.Done():
	}

	<-ctx.Done()
	s.logger.Info("Shutting down", nil)
	var errs []error
	select {
	case <-routerDone:
		// The router already stopped (it could not subscribe, or the
		// subscription ended): Close would wait for handlers that never
		// run until its timeout. Close the subscriber, which it may not
		// have done (a second Close does nothing).
		_ = s.cfg.Subscriber.Close()
	default:
		if err := s.router.Close(); err != nil {
			errs = append(errs, fmt.Errorf("router: %w", err))
		}
	}
	_ = s.oncebox.Close()
	if srv != nil {
		shutCtx, cancelShut := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelShut()
		if err := srv.Shutdown(shutCtx); err != nil {
			_ = srv.Close()
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	s.logger.Info("Shipping service stopped", nil)
	return errors.Join(errs...)
}

// statsHooks counts the inbox's outcomes for the service's own report and
// hands each to the Prometheus metrics (prom).
type statsHooks struct {
	prom                                 *metrics.InboxHooks
	consumed, duplicates, cached, failed atomic.Int64
}

// Consumed implements middleware.InboxHooks.
func (h *statsHooks) Consumed(ns string) { h.consumed.Add(1); h.prom.Consumed(ns) }

// Duplicate implements middleware.InboxHooks.
func (h *statsHooks) Duplicate(ns string, cached bool) {
	h.duplicates.Add(1)
	if cached {
		h.cached.Add(1)
	}
	h.prom.Duplicate(ns, cached)
}

// Failed implements middleware.InboxHooks.
func (h *statsHooks) Failed(ns string, err error) { h.failed.Add(1); h.prom.Failed(ns, err) }

// CacheMiss implements middleware.InboxHooks.
func (h *statsHooks) CacheMiss(ns string) { h.prom.CacheMiss(ns) }

// CacheError implements middleware.InboxHooks.
func (h *statsHooks) CacheError(err error) { h.prom.CacheError(err) }
