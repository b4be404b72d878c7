package service

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
	"github.com/oncebox/watermill-oncebox/publisher"
)

// Option adds to what New builds from the configuration: what a YAML file
// cannot hold (a broker publisher, a Redis client, metrics) and the
// settings that are about one process rather than about the events.
type Option func(*options)

type options struct {
	dialect        dialects.Dialect
	relay          message.Publisher
	relayConfig    poller.Config
	inboxConfig    middleware.InboxConfig
	poisonConfig   middleware.PoisonConfig
	publisher      publisher.Config
	cache          CacheFunc
	hooks          Hooks
	tracerProvider trace.TracerProvider
	propagator     propagation.TextMapPropagator
	senderChecks   [][]string
	sourceChecks   [][]string
	router         *message.Router
	routerGiven    bool
	closeTimeout   time.Duration
	clock          oncebox.Clock // tests only: see export_test.go
}

// CacheFunc builds the inbox cache from the inbox.cache section (its
// cache-name and ttl), for a cache the service cannot build itself:
//
//	service.WithInboxCache(func(c oncebox.CacheConfig) (cache.Cache, error) {
//		return rediscache.New(client, rediscache.Config{Name: c.CacheName, TTL: c.TTL})
//	})
type CacheFunc func(oncebox.CacheConfig) (cache.Cache, error)

// Hooks receive what the components of a Service do, for metrics and
// tests. Every field is optional. Package metrics provides collectors with
// these methods (metrics.NewPollerHooks, NewInboxHooks, NewPoisonHooks,
// NewDLQActionHooks), so that it plugs in without this package importing
// Prometheus.
type Hooks struct {
	// Poller receives what the relay does (poller.Config.Hooks).
	Poller poller.Hooks
	// Inbox receives what the inbox does (middleware.InboxConfig.Hooks).
	Inbox middleware.InboxHooks
	// OnParked, OnNacked and OnStoreFailed are the poison queue's
	// (middleware.PoisonConfig).
	OnParked, OnNacked, OnStoreFailed func(handler string, err error)
	// OnDLQAction is told of every status change or delete of DLQ rows
	// (dlq.Config.OnAction): the REST handler's and the Store's.
	OnDLQAction func(action string, n int)
	// OnInboxCleanUp is told of every run of the inbox clean-up.
	OnInboxCleanUp func(middleware.JobResult)
	// OnHandlers is told, when Run starts the router of WithRouter, the
	// names of its handlers, sorted: metrics creates their series at 0.
	OnHandlers func(handlers []string)
}

// WithDialect gives the dialect instead of letting New build it from the
// database key and tables. Its name must agree with the database key (or
// the handle's driver) and its tables with tables.schema and
// tables.prefix: a mismatch is an error, never a silent choice.
func WithDialect(d dialects.Dialect) Option { return func(o *options) { o.dialect = d } }

// WithRelay runs the relay (package poller) in Run, publishing the outbox to
// pub (the kafka or rabbitmq package's publisher, or any
// message.Publisher). A service with inbox.enabled needs it too: what the
// poison queue parked goes back to its topic through the outbox when an
// operator retries it. The service does not close pub.
func WithRelay(pub message.Publisher) Option { return func(o *options) { o.relay = pub } }

// WithRelayConfig sets the relay's settings that are about one process
// (InstanceID, CloseTimeout, the job schedules, IsUnavailable, Listener, …).
// Its Dialect, Oncebox, Hooks, Clock, TracerProvider and Propagator must be
// left zero: the service sets them from its configuration and options.
func WithRelayConfig(c poller.Config) Option { return func(o *options) { o.relayConfig = c } }

// WithInboxConfig sets the inbox's settings that are not in the
// configuration (Mode, Key, Namespace, HandlerNamespaces, SharedNamespace, AllowMissingKey,
// TxOptions). Its DB, Dialect, Cache, Hooks, Clock, TracerProvider and
// Propagator must be left zero.
func WithInboxConfig(c middleware.InboxConfig) Option {
	return func(o *options) { o.inboxConfig = c }
}

// WithPoisonConfig sets the poison queue's Key and ShouldPoison. Its other
// fields must be left zero (the hooks are Hooks').
func WithPoisonConfig(c middleware.PoisonConfig) Option {
	return func(o *options) { o.poisonConfig = c }
}

// WithPublisherConfig sets the publisher's DisableWakeOnCommit, WakeLimit
// and AllowNonTransactionalDangerously. Its Dialect, Oncebox, Clock and
// Propagator must be left zero.
func WithPublisherConfig(c publisher.Config) Option { return func(o *options) { o.publisher = c } }

// WithInboxCache builds the inbox cache with fn instead of the in-process
// one, when inbox.cache.enabled is true (it is an error otherwise: the
// cache would be ignored).
func WithInboxCache(fn CacheFunc) Option { return func(o *options) { o.cache = fn } }

// WithHooks plugs metrics (or anything else) into every component. Given
// more than once, the last one wins.
func WithHooks(h Hooks) Option { return func(o *options) { o.hooks = h } }

// WithTracing sets the tracer provider and propagator of the publisher, the
// relay and the inbox (default: OpenTelemetry's globals; see
// docs/tracing.md). Either may be nil to keep its default.
func WithTracing(tp trace.TracerProvider, p propagation.TextMapPropagator) Option {
	return func(o *options) { o.tracerProvider, o.propagator = tp, p }
}

// WithSenderCheck gives the warnings of the relay's broker check, logged
// when Run starts: kafka.CheckProducerConfig(saramaConfig) or
// kafka.CheckWatermillPublisherConfig(cfg) when outbox.sender.type is
// "kafka". Without it, a sender.type that is set logs that its check was
// not given.
func WithSenderCheck(warnings []string) Option {
	return func(o *options) { o.senderChecks = append(o.senderChecks, warnings) }
}

// WithSourceCheck gives the warnings of the consumed broker's check, logged
// when Run starts: kafka.CheckSubscriberConfig(cfg) when inbox.source.type
// is "kafka" (auto-commit, initial offset, consumer group), or
// rabbitmq.CheckSubscriberConfig(cfg) when it is "rabbitmq".
func WithSourceCheck(warnings []string) Option {
	return func(o *options) { o.sourceChecks = append(o.sourceChecks, warnings) }
}

// DefaultCloseTimeout is the default of WithCloseTimeout: Watermill's
// router's default CloseTimeout.
const DefaultCloseTimeout = 30 * time.Second

// WithCloseTimeout sets how long Run, once the service stops (Close, its
// context, a component's stop), waits for the functions given to Go to
// return after their context is cancelled (default DefaultCloseTimeout; it
// must not be negative). A function still running then is left running:
// Run and Close return an error naming it ("Go #2 (main.serveAdmin)"), so
// that one function ignoring its context cannot make Close wait for ever.
// The router and the relay have close timeouts of their own.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.closeTimeout = d } }
