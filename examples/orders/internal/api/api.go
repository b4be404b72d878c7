// Package api is the orders service: an HTTP API that writes an order and
// its order-created event in one PostgreSQL transaction (the transactional
// outbox), and the relay that delivers those events to the broker.
//
// Most teams run the relay inside the API process, as New does when given a
// broker publisher: every instance relays, and the instances need no
// coordinator (the claim is FOR UPDATE SKIP LOCKED, so two relays never take
// the same rows). The relay can also run as its own process (Config.Relay
// set and Config.DisableAPI true), for example to scale it apart from the
// API or to keep broker credentials out of the API's pods.
package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/events"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/pgdb"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/service"
)

// DefaultSchema is the PostgreSQL schema the orders service owns.
const DefaultSchema = "orders_api"

// Config configures a Server.
type Config struct {
	// Pool is the service's database. Required. The Server does not close it.
	Pool *pgxpool.Pool
	// Schema holds the service's tables and its oncebox tables. Default
	// DefaultSchema.
	Schema string
	// Oncebox is the oncebox configuration (oncebox.yaml). It must route
	// events.OrderCreatedType.
	Oncebox oncebox.Config
	// Relay is the broker publisher of the relay run by this process. Nil:
	// no relay here (another process relays the outbox). The Server does not
	// close it.
	Relay message.Publisher
	// RelayHooks receives what the relay does (metrics, the demo's counts).
	RelayHooks poller.Hooks
	// DisableAPI serves /healthz only: a relay-only process.
	DisableAPI bool
	// ShutdownTimeout bounds how long in-flight requests get to finish at
	// shutdown. Default 10s.
	ShutdownTimeout time.Duration
	// Logger logs. Default: nothing.
	Logger watermill.LoggerAdapter
}

// Server is the orders service. Build it with New, run it with Serve.
type Server struct {
	cfg     Config
	pg      *postgres.Dialect
	pub     publisher.Config
	oncebox *service.Service // the relay, when cfg.Relay is set
	relay   bool
	reg     *prometheus.Registry // served on GET /metrics
	logger  watermill.LoggerAdapter
	http    *http.Server
	ready   chan struct{}

	mu     sync.Mutex
	served bool
}

// New prepares the service's schema (its tables and oncebox's, see package
// pgdb) and builds the relay when cfg.Relay is set. It does no serving.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("api: Config.Pool is nil")
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.DisableAPI && cfg.Relay == nil {
		return nil, errors.New("api: neither the API nor the relay would run: give a Relay or leave the API on")
	}
	if _, err := events.Topic(cfg.Oncebox); err != nil {
		return nil, fmt.Errorf("api: oncebox configuration: %w", err)
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = watermill.NopLogger{}
	}
	pg, err := pgdb.Setup(ctx, cfg.Pool, cfg.Schema, schemaDDL(cfg.Schema))
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:    cfg,
		pg:     pg,
		relay:  cfg.Relay != nil,
		logger: cfg.Logger.With(watermill.LogFields{"service": "orders-api"}),
		ready:  make(chan struct{}),
	}
	// Metrics: the backlog of the outbox (cached COUNTs) and, with the relay,
	// its counters.
	s.reg = prometheus.NewRegistry()
	backlog, err := metrics.NewBacklogCollector(wsql.BeginnerFromPgx(cfg.Pool), pg, metrics.BacklogConfig{})
	if err != nil {
		return nil, err
	}
	if err := s.reg.Register(backlog); err != nil {
		return nil, err
	}
	// oncebox.yaml is shared with shipping: this service's schema is set
	// here. service.New builds the publisher's configuration and, with a
	// broker publisher, the relay.
	ocfg := cfg.Oncebox
	ocfg.Tables.Schema = cfg.Schema
	opts := []service.Option{service.WithDialect(pg)}
	if cfg.Relay != nil {
		relayMetrics, err := metrics.NewPollerHooks(s.reg)
		if err != nil {
			return nil, err
		}
		var hooks poller.Hooks = relayMetrics
		if cfg.RelayHooks != nil {
			hooks = teeHooks{relayMetrics, cfg.RelayHooks}
		}
		opts = append(opts, service.WithRelay(cfg.Relay), service.WithHooks(service.Hooks{Poller: hooks}))
	}
	if s.oncebox, err = service.New(wsql.BeginnerFromPgx(cfg.Pool), ocfg, cfg.Logger, opts...); err != nil {
		return nil, fmt.Errorf("api: oncebox: %w", err)
	}
	s.pub = s.oncebox.PublisherConfig()
	s.http = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return s, nil
}

// Dialect is the oncebox dialect of the service's schema (its tables'
// names), for tools and checks.
func (s *Server) Dialect() *postgres.Dialect { return s.pg }

// Ready is closed once Serve accepts requests and the relay, if any, runs.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Serve serves HTTP on ln and runs the relay until ctx ends, then shuts
// down gracefully: the listener stops accepting, requests in flight get
// ShutdownTimeout to finish, and then the relay stops (batches in flight
// are finished or released, never lost). It returns nil after a clean stop,
// or the error that stopped the server. ln is closed on return. Serve may be
// called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.served {
		s.mu.Unlock()
		_ = ln.Close()
		return errors.New("api: Serve called twice")
	}
	s.served = true
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	if s.relay {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not ctx: the relay is stopped by Close, after the HTTP server.
			if err := s.oncebox.Run(context.WithoutCancel(ctx)); err != nil {
				errc <- fmt.Errorf("relay: %w", err)
				cancel()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
			cancel()
		}
	}()
	if s.relay {
		select {
		case <-s.oncebox.Running():
		case <-ctx.Done():
		}
	}
	close(s.ready)
	s.logger.Info("Orders service running", watermill.LogFields{"addr": ln.Addr().String(),
		"api": !s.cfg.DisableAPI, "relay": s.relay, "schema": s.cfg.Schema})

	<-ctx.Done()
	s.logger.Info("Shutting down", nil)
	shutCtx, cancelShut := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancelShut()
	var errs []error
	if err := s.http.Shutdown(shutCtx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		_ = s.http.Close()
	}
	if s.relay {
		// After the HTTP server: the last requests' events are committed,
		// and whatever the relay has not sent stays PENDING for the next
		// instance; nothing is lost either way.
		_ = s.oncebox.Close()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	s.logger.Info("Orders service stopped", nil)
	return errors.Join(errs...)
}

// Run listens on addr (host:port) and calls Serve.
func (s *Server) Run(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("api: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// teeHooks hands what the relay does to two hooks: the metrics and the
// caller's.
type teeHooks [2]poller.Hooks

func (t teeHooks) PollDone(i poller.PollInfo) { t[0].PollDone(i); t[1].PollDone(i) }
func (t teeHooks) NotifyQueueUsage(r float64) { t[0].NotifyQueueUsage(r); t[1].NotifyQueueUsage(r) }
func (t teeHooks) Sent(typ string, ids []oncebox.EventID) {
	t[0].Sent(typ, ids)
	t[1].Sent(typ, ids)
}
func (t teeHooks) SendFailed(typ string, f []poller.Failure) {
	t[0].SendFailed(typ, f)
	t[1].SendFailed(typ, f)
}
func (t teeHooks) BrokerUnavailable(typ string, n int, err error) {
	t[0].BrokerUnavailable(typ, n, err)
	t[1].BrokerUnavailable(typ, n, err)
}
func (t teeHooks) BrokerOutage(typ string, down bool, err error) {
	t[0].BrokerOutage(typ, down, err)
	t[1].BrokerOutage(typ, down, err)
}
func (t teeHooks) StaleFinalize(typ string, want, got int) {
	t[0].StaleFinalize(typ, want, got)
	t[1].StaleFinalize(typ, want, got)
}
func (t teeHooks) JobDone(j poller.JobInfo) { t[0].JobDone(j); t[1].JobDone(j) }
func (t teeHooks) ClockOffset(offset time.Duration) {
	t[0].ClockOffset(offset)
	t[1].ClockOffset(offset)
}
