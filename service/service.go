// Package service builds a whole oncebox service from its configuration:
// one call instead of fifteen constructors, and one Run/Close/Running for
// everything that runs in the background.
//
//	cfg, err := oncebox.LoadConfigFile("oncebox.yaml")
//	svc, err := service.New(wsql.BeginnerFromPgx(pool), cfg, logger,
//		service.WithRelay(brokerPublisher), service.WithRouter(router))
//	router.AddMiddleware(svc.Middleware)     // poison queue → retry → inbox
//	pub, err := svc.Publisher(tx)            // in the caller's transaction
//	err = svc.Run(ctx)                       // router, then relay, DLQ jobs, inbox clean-up
//
// Every key of the configuration takes effect through it: database and
// tables build the dialect; outbox.* drives the publisher and the relay;
// inbox.enabled builds the consuming side (inbox, poison queue and
// inbox.retry in one middleware, inbox.clean-up, and the DLQ retry of what
// the poison queue parked); inbox.cache builds the cache; the sender and
// source types select the start-up checks. The separate constructors of
// packages publisher, poller, middleware, subscriber and dlq stay for those
// who want them; docs/configuration.md shows the migration.
package service

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/internal/lifecycle"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/migrate"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
	"github.com/oncebox/watermill-oncebox/subscriber"
)

// ErrConsumerOff is the error of every message handled through
// Service.Middleware when inbox.enabled is false.
var ErrConsumerOff = errors.New("oncebox: service: the consuming side is off: set inbox.enabled: true")

// Service is one service's oncebox: the publisher's configuration, the
// relay, the consuming side and the DLQ, built from one configuration. Build
// it with New, run its background work with Run, stop it with Close. It is
// safe for concurrent use. Its Run/Close/Running answer as every
// long-running type's (docs/design.md, "Lifecycle"): Run after Close or
// with a done context returns nil at once, Close before Run closes
// Running, a second Run is an error, Close may be called again and from
// any goroutine.
type Service struct {
	inboxMode    middleware.InboxMode // the inbox's mode, for the typed handlers (handler.go)
	db           wsql.Beginner
	cfg          oncebox.Config
	logger       watermill.LoggerAdapter
	dialect      dialects.Dialect
	pubCfg       publisher.Config
	relay        *poller.Poller
	inbox        *middleware.Inbox
	poison       *middleware.PoisonQueue
	consumer     *middleware.Consumer
	cleaner      *middleware.InboxCleaner
	store        *dlq.Store
	warnings     []string
	router       *message.Router               // WithRouter; nil without
	goFuncs      []func(context.Context) error // Go's; guarded by mu
	onHandlers   func([]string)                // Hooks.OnHandlers
	relayPub     message.Publisher             // WithRelay's; nil without
	goNames      []string                      // goFuncs' names, for the close timeout's error; guarded by mu
	goStopped    []chan struct{}               // closed when goFuncs' function returned; guarded by mu
	clock        oncebox.Clock                 // the components' clock (nil: the real one)
	closeTimeout time.Duration                 // WithCloseTimeout, default applied
	closeErr     error                         // the functions given to Go that did not stop in time; set before done is closed
	misuse       chan error                    // the inbox found Retry inside it (InboxConfig.OnMisuse)

	life     *lifecycle.Lifecycle // Run, Close, Running (internal/lifecycle)
	mu       sync.Mutex
	goSealed bool // Run was called: Go panics; guarded by mu
}

// New builds a Service over db, a pool (sql.BeginnerFromPgx(pool) or
// sql.BeginnerFromStdSQL(db)), from cfg. cfg is completed with its
// defaults and validated (LoadConfig already did both). New does no I/O:
// the database is first used by Run, Migrate or a message. Errors name the
// configuration key or the option at fault.
func New(db wsql.Beginner, cfg oncebox.Config, logger watermill.LoggerAdapter, opts ...Option) (*Service, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	if db == nil {
		return nil, fmt.Errorf("%w: service: db is nil", oncebox.ErrInvalidConfig)
	}
	if _, isTx := db.(interface{ Commit() error }); isTx {
		return nil, fmt.Errorf("%w: service: db is a transaction; pass the pool (the relay and the inbox open their own transactions, Publisher takes yours)", oncebox.ErrInvalidConfig)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	// The configuration and the options, each completed with its defaults
	// and then checked, as every config of the module.
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if err := o.validate(cfg); err != nil {
		return nil, fmt.Errorf("%w: service: %w", oncebox.ErrInvalidConfig, err)
	}
	d, err := dialectFor(db, cfg, o.dialect)
	if err != nil {
		return nil, err
	}
	s := &Service{db: db, cfg: cfg, dialect: d, clock: o.clock, closeTimeout: o.closeTimeout, life: lifecycle.New("service"),
		misuse: make(chan error, 1), logger: logger.With(watermill.LogFields{"component": "oncebox-service"})}
	if err := s.build(o, logger); err != nil {
		return nil, err
	}
	s.warnings = startupWarnings(cfg, o)
	s.relayPub, s.onHandlers = o.relay, o.hooks.OnHandlers
	return s, nil
}

// withDefaults returns o with its zero settings set to their defaults.
func (o options) withDefaults() options {
	if o.closeTimeout == 0 {
		o.closeTimeout = DefaultCloseTimeout
	}
	return o
}

// validate refuses the options' fields that the service sets itself, so
// that nothing the caller passes is silently overwritten.
func (o *options) validate(cfg oncebox.Config) error {
	var errs []error
	set := func(option, field string, isSet bool) {
		if isSet {
			errs = append(errs, fmt.Errorf("%s: %s must be left zero: the service sets it", option, field))
		}
	}
	r := o.relayConfig
	set("WithRelayConfig", "Dialect", r.Dialect != nil)
	set("WithRelayConfig", "Oncebox", !reflect.ValueOf(r.Oncebox).IsZero())
	set("WithRelayConfig", "Hooks (use WithHooks)", r.Hooks != nil)
	set("WithRelayConfig", "Clock", r.Clock != nil)
	set("WithRelayConfig", "TracerProvider and Propagator (use WithTracing)", r.TracerProvider != nil || r.Propagator != nil)
	i := o.inboxConfig
	set("WithInboxConfig", "Dialect", i.Dialect != nil)
	set("WithInboxConfig", "Cache (use inbox.cache and WithInboxCache)", i.Cache != nil)
	set("WithInboxConfig", "Hooks (use WithHooks)", i.Hooks != nil)
	set("WithInboxConfig", "Clock", i.Clock != nil)
	set("WithInboxConfig", "TracerProvider and Propagator (use WithTracing)", i.TracerProvider != nil || i.Propagator != nil)
	p := o.poisonConfig
	set("WithPoisonConfig", "Dialect", p.Dialect != nil)
	set("WithPoisonConfig", "Clock", p.Clock != nil)
	set("WithPoisonConfig", "OnParked, OnNacked and OnStoreFailed (use WithHooks)", p.OnParked != nil || p.OnNacked != nil || p.OnStoreFailed != nil)
	c := o.publisher
	set("WithPublisherConfig", "Dialect", c.Dialect != nil)
	set("WithPublisherConfig", "Oncebox", !reflect.ValueOf(c.Oncebox).IsZero())
	set("WithPublisherConfig", "Clock", c.Clock != nil)
	set("WithPublisherConfig", "Propagator (use WithTracing)", c.Propagator != nil)
	if o.cache != nil && !cfg.Inbox.Cache.Enabled {
		errs = append(errs, errors.New("WithInboxCache: inbox.cache.enabled is false, so the cache would never be asked; enable it"))
	}
	if o.closeTimeout < 0 {
		errs = append(errs, fmt.Errorf("WithCloseTimeout: must be positive (or 0 for the default, %s), got %s", DefaultCloseTimeout, o.closeTimeout))
	}
	if o.routerGiven && o.router == nil {
		errs = append(errs, errors.New("WithRouter: the router is nil"))
	}
	if cfg.Inbox.Enabled && o.relay == nil {
		errs = append(errs, errors.New("inbox.enabled: the poison queue parks failed messages, and a retried one goes back to its topic through the outbox: pass WithRelay(publisher) with a publisher to the broker consumed from"))
	}
	return errors.Join(errs...)
}

// build makes every component; none does I/O.
func (s *Service) build(o options, logger watermill.LoggerAdapter) error {
	cfg, d := s.cfg, s.dialect
	s.router = o.router
	s.pubCfg = o.publisher
	s.pubCfg.Dialect, s.pubCfg.Oncebox, s.pubCfg.Clock, s.pubCfg.Propagator = d, cfg, o.clock, o.propagator
	var err error
	s.store, err = dlq.NewStore(s.db, dlq.Config{Dialect: d, Clock: o.clock, OnAction: o.hooks.OnDLQAction})
	if err != nil {
		return err
	}
	if o.relay != nil {
		rc := o.relayConfig
		rc.Dialect, rc.Oncebox, rc.Hooks, rc.Clock = d, cfg, o.hooks.Poller, o.clock
		rc.TracerProvider, rc.Propagator = o.tracerProvider, o.propagator
		if s.relay, err = poller.New(s.db, o.relay, rc, logger); err != nil {
			return err
		}
	}
	if !cfg.Inbox.Enabled {
		return nil
	}
	ic := o.inboxConfig
	s.inboxMode = ic.Mode
	ic.Dialect, ic.Hooks, ic.Clock = d, o.hooks.Inbox, o.clock
	ic.TracerProvider, ic.Propagator = o.tracerProvider, o.propagator
	// A misused inbox (Watermill's Retry inside it) stops the service: Run
	// returns the error, which names the fix, and closes the router, instead
	// of a router that holds every message unacknowledged.
	userMisuse := ic.OnMisuse
	ic.OnMisuse = func(err error) {
		if userMisuse != nil {
			userMisuse(err)
		}
		select {
		case s.misuse <- err:
		default:
		}
	}
	if cfg.Inbox.Cache.Enabled {
		if ic.Cache, err = newCache(cfg.Inbox.Cache, o.cache); err != nil {
			return err
		}
	}
	if s.inbox, err = middleware.NewInbox(s.db, ic, logger); err != nil {
		return err
	}
	pc := o.poisonConfig
	pc.Dialect, pc.Clock = d, o.clock
	pc.OnParked, pc.OnNacked, pc.OnStoreFailed = o.hooks.OnParked, o.hooks.OnNacked, o.hooks.OnStoreFailed
	if s.poison, err = middleware.NewPoisonQueue(s.db, pc, logger); err != nil {
		return err
	}
	if s.consumer, err = middleware.NewConsumer(middleware.ConsumerConfig{PoisonQueue: s.poison, Inbox: s.inbox,
		Retry: cfg.Inbox.Retry}, logger); err != nil {
		return err
	}
	s.cleaner, err = middleware.NewInboxCleaner(s.db, middleware.InboxCleanerConfig{Dialect: d,
		CleanUp: cfg.Inbox.CleanUp, Clock: o.clock, OnRun: o.hooks.OnInboxCleanUp}, logger)
	return err
}

func newCache(c oncebox.CacheConfig, fn CacheFunc) (cache.Cache, error) {
	if fn == nil {
		mem, err := cache.NewMemory(c.Size, c.TTL)
		if err != nil {
			return nil, fmt.Errorf("inbox.cache: %w", err)
		}
		return mem, nil
	}
	cc, err := fn(c)
	if err != nil {
		return nil, fmt.Errorf("%w: service: inbox.cache: WithInboxCache: %w", oncebox.ErrInvalidConfig, err)
	}
	if cc == nil {
		return nil, fmt.Errorf("%w: service: inbox.cache: WithInboxCache returned a nil cache", oncebox.ErrInvalidConfig)
	}
	return cc, nil
}

// dialectFor builds the dialect from the database key (or the handle's
// driver) and the tables section, or checks the one given against both.
func dialectFor(db wsql.Beginner, cfg oncebox.Config, given dialects.Dialect) (dialects.Dialect, error) {
	name := cfg.Database
	if name != "" {
		known, ok := registry.Lookup(name)
		if !ok {
			return nil, fieldErr("database", "must be one of %s, or empty, got %q", strings.Join(registry.Names(), ", "), name)
		}
		name = known.Name // "mariadb" is "mysql"
	}
	driver, driverName := driverOf(db)
	switch {
	case name != "" && driverName != "" && name != driverName:
		return nil, fieldErr("database", "is %q but the database handle's driver (%s) is %s's", name, driver, driverName)
	case name == "":
		name = driverName
	}
	if given != nil {
		if name != "" && given.Name() != name {
			return nil, fieldErr("database", "the dialect of WithDialect is %q, but the configuration says %q", given.Name(), name)
		}
		want, err := dialects.NewTables(cfg.Tables)
		if err != nil {
			return nil, err
		}
		if got := given.Tables(); got != want {
			return nil, fieldErr("tables", "the dialect of WithDialect places the outbox in %s, but tables.schema and tables.prefix place it in %s",
				got.Events, want.Events)
		}
		return dialects.ForPartitions(given, cfg.Outbox.Partitions)
	}
	if name == "" {
		return nil, fieldErr("database", "is empty and the database handle's driver (%s) is not one oncebox knows: set database to one of %s",
			driver, strings.Join(registry.Names(), ", "))
	}
	d, err := registry.New(name, cfg.Tables)
	if err != nil {
		return nil, err
	}
	// Migrate then partitions the outbox when outbox.partitions is on.
	return dialects.ForPartitions(d, cfg.Outbox.Partitions)
}

// driverOf names the type behind db and the database its driver speaks
// ("" when unknown). The drivers are recognised by their package path, so
// that this package links none of them.
func driverOf(db wsql.Beginner) (string, string) {
	var t reflect.Type
	switch b := db.(type) {
	case wsql.PgxBeginner:
		t = reflect.TypeOf(b.Conn) // a *pgxpool.Pool or *pgx.Conn
	case *wsql.PgxBeginner:
		t = reflect.TypeOf(b.Conn)
	case wsql.StdSQLBeginner:
		sdb, ok := b.SQLBeginner.(*stdsql.DB)
		if !ok {
			return fmt.Sprintf("%T", b.SQLBeginner), ""
		}
		t = reflect.TypeOf(inprocess.BaseDriver(sdb)) // through inprocess's wrapper, the driver it wraps
	default:
		return fmt.Sprintf("%T", db), ""
	}
	if t == nil {
		return fmt.Sprintf("%T", db), ""
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	if d, ok := registry.ForDriverPackage(pkg); ok {
		return pkg, d.Name
	}
	return pkg, ""
}

func fieldErr(field, format string, args ...any) error {
	return &oncebox.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Dialect is the dialect built from database and tables.
func (s *Service) Dialect() dialects.Dialect { return s.dialect }

// Config is the configuration in effect, defaults applied.
func (s *Service) Config() oncebox.Config { return s.cfg }

// Migrate creates or upgrades the oncebox tables (migrate.Migrate). Teams
// that run migrations as a deploy step call it there instead of at start.
func (s *Service) Migrate(ctx context.Context) error { return migrate.Migrate(ctx, s.db, s.dialect) }

// PublisherConfig is the configuration of the outbox publisher, for
// publisher.Emit and the separate constructors.
func (s *Service) PublisherConfig() publisher.Config { return s.pubCfg }

// Publisher returns the outbox publisher over the caller's transaction tx
// (sql.TxFromPgx, sql.TxFromStdSQL): its events commit or roll back with
// tx. Build one per transaction; it is cheap.
func (s *Service) Publisher(tx wsql.ContextExecutor) (*publisher.Publisher, error) {
	return publisher.NewPublisher(tx, s.pubCfg, s.logger)
}

// Relay is the relay Run runs; nil without WithRelay.
func (s *Service) Relay() *poller.Poller { return s.relay }

// Inbox is the inbox; nil unless inbox.enabled.
func (s *Service) Inbox() *middleware.Inbox { return s.inbox }

// PoisonQueue is the poison queue; nil unless inbox.enabled.
func (s *Service) PoisonQueue() *middleware.PoisonQueue { return s.poison }

// Middleware is the consuming side's router middleware: the poison queue,
// the inbox.retry policy and the inbox, in the one safe order (see
// middleware.Consumer). Add it instead of the three:
//
//	router.AddMiddleware(svc.Middleware)
//
// Without inbox.enabled every message fails with ErrConsumerOff.
func (s *Service) Middleware(h message.HandlerFunc) message.HandlerFunc {
	if s.consumer == nil {
		return func(*message.Message) ([]*message.Message, error) { return nil, ErrConsumerOff }
	}
	return s.consumer.Middleware(h)
}

// Subscriber decorates sub with the inbox (subscriber.NewInboxSubscriber),
// for consumers without a router. It fails with ErrConsumerOff without
// inbox.enabled.
func (s *Service) Subscriber(sub message.Subscriber) (*subscriber.InboxSubscriber, error) {
	if s.inbox == nil {
		return nil, ErrConsumerOff
	}
	return subscriber.NewInboxSubscriber(sub, s.inbox, s.logger)
}

// DLQStore is the store over the DLQ table (list, retry, resolve, delete).
func (s *Service) DLQStore() *dlq.Store { return s.store }

// DLQHandler returns the DLQ REST handler (dlq.NewHandler) over DLQStore;
// hc.Store must be nil and hc.Logger defaults to the service's.
func (s *Service) DLQHandler(hc dlq.HandlerConfig) (http.Handler, error) {
	if hc.Store != nil {
		return nil, fmt.Errorf("%w: service: DLQHandler: HandlerConfig.Store must be nil: the service gives its own", oncebox.ErrInvalidConfig)
	}
	hc.Store = s.store
	if hc.Logger == nil {
		hc.Logger = s.logger
	}
	return dlq.NewHandler(hc)
}

// Warnings are the start-up checks' warnings, which Run logs.
func (s *Service) Warnings() []string { return append([]string(nil), s.warnings...) }
