package oncebox

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Default values of the configuration. Every field of [Config] documents which
// of these it takes when left at its zero value.
const (
	DefaultBatchSize              = 200
	DefaultMinFixedDelay          = 250 * time.Millisecond
	DefaultMaxFixedDelay          = time.Minute
	DefaultPollingMultiplier      = 1.5
	DefaultMaxRetries             = 3
	DefaultBackoffDelay           = 10 * time.Second
	DefaultBackoffMultiplier      = 3.0
	DefaultMaxBatchProcessingTime = 300 * time.Second
	DefaultOutboxTTL              = 24 * time.Hour
	DefaultInboxTTL               = 24 * time.Hour
	DefaultDLQTTL                 = 7 * 24 * time.Hour
	DefaultCleanUpBatchSize       = 1000
	DefaultCacheTTL               = time.Hour
	DefaultMaxPayloadSize         = 1 << 20 // 1 MiB, Kafka's default message.max.bytes
	DefaultMaxDiscoveredTypes     = 100
	DefaultCacheSize              = 100_000
	DefaultConsumerRetries        = 3
	DefaultRetryInitialInterval   = 100 * time.Millisecond
	DefaultRetryMaxInterval       = 10 * time.Second
	DefaultRetryMultiplier        = 2.0

	// MaxDiscoveredTypesLimit bounds outbox.max-discovered-types: the
	// discovery reads the types in pages of at most 999 (MySQL's recursion
	// and statement limits).
	MaxDiscoveredTypesLimit = 999
	// MaxBatchSize bounds batch-size: a claim returns at most this many rows.
	MaxBatchSize = 10_000
	// MaxEventTypeLength is the longest event type or topic name accepted; the
	// columns are 255 characters wide on every dialect.
	MaxEventTypeLength = 255
	// MinDelay is the shortest polling delay (min-fixed-delay,
	// max-fixed-delay) and backoff delay accepted. Below it a poller spins on
	// the database; 1ms is what the tests and benchmarks use to drain fast.
	MinDelay = time.Millisecond
	// MaxRetriesLimit bounds max-retries. An event failing a thousand times
	// is poison, and a larger count only hides it from the dead letter
	// queue.
	MaxRetriesLimit = 1000
	// MaxRetryDelay bounds the longest backoff delay of an event type, the
	// one before its last retry: delay × multiplier^(max-retries − 1). A
	// longer wait is a typo (a multiplier or a retry count off by a factor),
	// and past about 292 years it would not fit in a time.Duration at all.
	MaxRetryDelay = 7 * 24 * time.Hour
)

// PollingType selects how a poller waits between polls.
type PollingType string

const (
	// PollingAdaptive waits min-fixed-delay after a full batch and multiplies
	// the delay by multiplier, up to max-fixed-delay, after a partial or empty
	// one. It is the default.
	PollingAdaptive PollingType = "adaptive"
	// PollingFixed always waits min-fixed-delay between polls.
	PollingFixed PollingType = "fixed"
)

// Config is the whole oncebox configuration: the `oncebox:` block of a
// service's YAML file.
// Build it in Go or load it with [LoadConfig]; call [Config.WithDefaults] and
// [Config.Validate] (LoadConfig does both) before use.
type Config struct {
	// MaxConcurrentQueries (YAML thread-pool-size, the brief's name) bounds
	// the goroutines of the relay that use a database connection at once:
	// the default of poller.Config.MaxConcurrentQueries, which documents it.
	// 0 means 2 + n without DLQ and 5 + n with DLQ, n being the number of
	// event types (one more with discovery): one connection for each
	// goroutine of the relay that may hold one.
	MaxConcurrentQueries int `yaml:"thread-pool-size"`
	// Database names the database the tables are on: "postgres", "mysql"
	// (MySQL and MariaDB) or "oracle"; it selects the dialect, and the
	// oncebox CLI's --config reads it. Empty: told by the caller (the
	// dialect given, or the CLI's --dsn). The connection string is not
	// part of the configuration: it holds a password.
	Database string `yaml:"database"`
	// Tables names the schema and table prefix of the oncebox tables.
	Tables TablesConfig `yaml:"tables"`
	// Outbox configures the publishing side.
	Outbox OutboxConfig `yaml:"outbox"`
	// Inbox configures the consuming side.
	Inbox InboxConfig `yaml:"inbox"`
}

// TablesConfig places the oncebox tables. Both fields are validated as plain
// SQL identifiers (letters, digits, underscores) so nothing can be injected,
// and the schema must not be a reserved word of any supported engine.
type TablesConfig struct {
	// Schema is the database schema (PostgreSQL, Oracle) or database (MySQL)
	// holding the tables. Empty: the connection's default. A reserved word
	// of SQL:2016, PostgreSQL, MySQL/MariaDB or Oracle ("user", "order", …)
	// is refused.
	Schema string `yaml:"schema"`
	// Prefix is prepended to every table name, e.g. "billing_" gives
	// "billing_outbox_events". Empty by default.
	Prefix string `yaml:"prefix"`
}

// OutboxConfig configures the outbox and its relay.
type OutboxConfig struct {
	// Sender names the broker the relay publishes to: "kafka", "rabbitmq" or
	// "" (whatever message.Publisher the relay is given). Informational: it
	// selects the start-up checks of the broker.
	Sender SenderConfig `yaml:"sender"`
	// Defaults holds the settings every event type inherits.
	Defaults EventSettings `yaml:"defaults"`
	// Events holds one entry per event type; each overrides any part of
	// Defaults and inherits the rest. A type missing from it is published and
	// relayed with Defaults (its topic is its name), unless StrictEventTypes.
	Events map[string]EventSettings `yaml:"events"`
	// StrictEventTypes limits the outbox to the types in Events: publishing
	// another type fails with ErrUnknownEventType, and the relay polls only
	// those types (no discovery of others). Default false: like Watermill's
	// forwarder, every type that is published is relayed. It needs Events.
	StrictEventTypes bool `yaml:"strict-event-types"`
	// MaxDiscoveredTypes bounds how many event types missing from Events
	// (found by the relay's discovery) have a poll loop of their own at
	// once. More due types than that take turns: a loop yields to a waiting
	// type after the defaults' max-fixed-delay (docs/design.md,
	// "Discovery"). Default 100, at most MaxDiscoveredTypesLimit.
	MaxDiscoveredTypes int `yaml:"max-discovered-types"`
	// DLQ configures the dead letter queue of events that exhausted their
	// retries.
	DLQ DLQConfig `yaml:"dlq"`
	// CleanUp configures the deletion of PROCESSED rows. Default ttl 24h,
	// batch size 1000.
	CleanUp CleanUpConfig `yaml:"clean-up"`
	// Partitions range-partitions the outbox table by time (PostgreSQL,
	// opt-in; config_partitions.go). Default off.
	Partitions PartitionsConfig `yaml:"partitions"`
	// Finalize is what the relay does with a row once the broker confirmed
	// its event: FinalizeMark ("mark", the default) marks it PROCESSED,
	// deleted by the clean-up job after clean-up.ttl; FinalizeDelete
	// ("delete") deletes it at once (config_finalize.go).
	Finalize string `yaml:"finalize"`
	// MaxBatchProcessingTime is how long a row may stay IN_PROCESS before the
	// recovery job returns it to PENDING (without counting an attempt).
	// Default 300s.
	MaxBatchProcessingTime time.Duration `yaml:"max-batch-processing-time"`
	// MaxPayloadSize is the largest event, in bytes, the publisher accepts:
	// its payload plus the bytes of every metadata key and value, which the
	// broker receives as headers of the same record. Default 1 MiB.
	MaxPayloadSize int `yaml:"max-payload-size"`
}

// SenderConfig names the broker of the relay.
type SenderConfig struct {
	// Type is "kafka", "rabbitmq" or "". Default "".
	Type string `yaml:"type"`
}

// SourceConfig names the broker the inbox consumes from.
type SourceConfig struct {
	// Type is "kafka", "rabbitmq" or "". Default "".
	Type string `yaml:"type"`
}

// EventSettings are the per-event-type settings. In [OutboxConfig.Defaults]
// a zero field takes the package default; in [OutboxConfig.Events] a zero
// field inherits the defaults block. Fields whose zero value is meaningful
// (MaxRetries, Backoff.Enabled) are pointers: nil inherits.
type EventSettings struct {
	// Topic is the destination topic on the broker. Empty: the defaults
	// block's topic, or else the event type itself.
	Topic string `yaml:"topic"`
	// BatchSize is the most rows one poll claims. Default 200, at most 10,000.
	BatchSize int `yaml:"batch-size"`
	// Polling sets the pace of the poller of the type.
	Polling PollingSettings `yaml:"polling"`
	// MaxRetries is the number of retries after the first failed attempt:
	// an event is attempted at most 1 + MaxRetries times, then becomes FAILED.
	// Default 3 (4 attempts, with the default backoff 10s, 30s and 90s apart).
	// 0 means a single attempt; at most MaxRetriesLimit (1,000).
	MaxRetries *int `yaml:"max-retries"`
	// Backoff sets the delay before a retry.
	Backoff BackoffSettings `yaml:"backoff"`
	// Ordering is "key" to publish the events of one key (oncebox.SetKey)
	// in the order they were published, one at a time across every relay
	// instance (docs/ordering.md), or "none" (the default): unordered.
	// Events without a key are unordered either way. Every instance must
	// give a type the same ordering.
	Ordering Ordering `yaml:"ordering"`
	// OnFailure says what an event of an ordered type that left the outbox
	// FAILED (moved to the DLQ) does to the later events of its key: "skip"
	// (the default) lets the next one go; "block" holds the key until an
	// operator retries, resolves or deletes the DLQ row. Only with ordering
	// "key".
	OnFailure OnFailure `yaml:"on-failure"`
}

// Ordering is the ordering of an event type's events.
type Ordering string

const (
	// OrderingNone sends events in any order (claim order on one
	// instance, nothing across instances, retries or recovery). It is the
	// default.
	OrderingNone Ordering = "none"
	// OrderingKey publishes the events of one key in publish (id) order,
	// one at a time across every instance: an event is claimed only when
	// no earlier event of its key is waiting, retrying or in flight.
	OrderingKey Ordering = "key"
)

// OnFailure is what a FAILED event of an ordered type does to its key.
type OnFailure string

const (
	// OnFailureSkip lets the next event of the key go once the FAILED one
	// has left the outbox for the DLQ (or right away if it stays FAILED in
	// the outbox without a DLQ). It is the default.
	OnFailureSkip OnFailure = "skip"
	// OnFailureBlock holds the later events of the key while the FAILED
	// event is in the outbox or its DLQ row is not RESOLVED (nor deleted).
	OnFailureBlock OnFailure = "block"
)

// PollingSettings set the delay between two polls of one event type.
type PollingSettings struct {
	// Type is "adaptive" (default) or "fixed".
	Type PollingType `yaml:"type"`
	// MinFixedDelay is the delay after a full batch (adaptive) or between any
	// two polls (fixed). Default 250ms, at least MinDelay (1ms).
	MinFixedDelay time.Duration `yaml:"min-fixed-delay"`
	// MaxFixedDelay caps the adaptive delay: the longest an event waits to be
	// picked up on an idle type. Default 1m, at least MinDelay (1ms). Ignored
	// by fixed polling.
	MaxFixedDelay time.Duration `yaml:"max-fixed-delay"`
	// Multiplier grows the adaptive delay after a partial or empty batch.
	// Default 1.5, at least 1, finite (NaN and infinities are refused).
	Multiplier float64 `yaml:"multiplier"`
}

// BackoffSettings set the delay before retrying a failed event:
// Delay × Multiplier^n for the (n+1)-th retry, exact to the nanosecond. The
// delay before the last retry must not exceed MaxRetryDelay (7 days).
type BackoffSettings struct {
	// Enabled turns the backoff on. Default true. Disabled: retry at once.
	Enabled *bool `yaml:"enabled"`
	// Delay is the delay before the first retry. Default 10s, at least
	// MinDelay (1ms).
	Delay time.Duration `yaml:"delay"`
	// Multiplier grows the delay at each retry. Default 3.0, at least 1,
	// finite.
	Multiplier float64 `yaml:"multiplier"`
}

// DLQConfig configures the dead letter queue table.
type DLQConfig struct {
	// Enabled moves FAILED events to the DLQ table. Default false: FAILED rows
	// stay in the outbox table.
	Enabled bool `yaml:"enabled"`
	// CleanUp deletes RESOLVED DLQ rows. Default ttl 7 days (168h).
	CleanUp CleanUpConfig `yaml:"clean-up"`
}

// CleanUpConfig configures a clean-up job.
type CleanUpConfig struct {
	// TTL is the age after which rows are deleted.
	TTL time.Duration `yaml:"ttl"`
	// BatchSize is the most rows one delete statement removes. Default 1000.
	BatchSize int `yaml:"batch-size"`
}

// InboxConfig configures the consuming side.
type InboxConfig struct {
	// Enabled makes service.New build the consuming side: the inbox, the
	// poison queue and the retry policy (one middleware, in the one safe
	// order), the inbox clean-up, and the DLQ retry of what the poison queue
	// parked (which needs outbox.dlq.enabled and a relay to send it back).
	// Default false.
	Enabled bool `yaml:"enabled"`
	// Retry is the policy of the retries of a failed handler, inside the
	// poison queue and outside the inbox: each attempt is its own
	// transaction.
	Retry RetryConfig `yaml:"retry"`
	// Source names the broker consumed from. Informational: it selects the
	// start-up checks (auto-commit warnings).
	Source SourceConfig `yaml:"source"`
	// CleanUp deletes processed ids older than its ttl. Default ttl 24h: the
	// inbox ttl must outlast the longest time a duplicate can still arrive.
	CleanUp CleanUpConfig `yaml:"clean-up"`
	// Cache configures the optional cache in front of the inbox table.
	Cache CacheConfig `yaml:"cache"`
}

// RetryConfig is the retry policy of a consumer's handler: Watermill's
// middleware.Retry with these values. The waits are InitialInterval ×
// Multiplier^n, at most MaxInterval; after the last retry the poison queue
// parks the message.
type RetryConfig struct {
	// MaxRetries is the number of retries after the first failed attempt.
	// Default 3 (4 attempts); 0 means a single attempt; at most
	// MaxRetriesLimit (1,000).
	MaxRetries *int `yaml:"max-retries"`
	// InitialInterval is the wait before the first retry. Default 100ms, at
	// least MinDelay (1ms).
	InitialInterval time.Duration `yaml:"initial-interval"`
	// MaxInterval caps the wait. Default 10s; at least InitialInterval.
	MaxInterval time.Duration `yaml:"max-interval"`
	// Multiplier grows the wait at each retry. Default 2, at least 1, finite.
	Multiplier float64 `yaml:"multiplier"`
}

// CacheConfig configures the inbox cache.
type CacheConfig struct {
	// Enabled turns the cache on. Default false. service.New then builds an
	// in-process cache of Size entries, or the cache its WithInboxCache
	// option builds (Redis) from CacheName and TTL.
	Enabled bool `yaml:"enabled"`
	// Size is the most ids the in-process cache holds. Default 100,000.
	// Not read by a cache of the caller's (Redis).
	Size int `yaml:"size"`
	// CacheName namespaces the keys, and must be unique per service: the key is
	// the event id alone, so two services sharing one cache under one name
	// would mark each other's events as seen. Required when Enabled.
	CacheName string `yaml:"cache-name"`
	// TTL is the lifetime of a cache entry. Default 1h; at most the inbox
	// clean-up ttl, or the cache would answer for ids the table forgot.
	TTL time.Duration `yaml:"ttl"`
}

// EventConfig is the resolved configuration of one event type: the defaults
// block overlaid with the type's overrides. Every field is set.
type EventConfig struct {
	EventType  string
	Topic      string
	BatchSize  int
	Polling    PollingSettings
	MaxRetries int
	Backoff    Backoff
	// Ordering is OrderingNone or OrderingKey.
	Ordering Ordering
	// OnFailure is OnFailureSkip or OnFailureBlock.
	OnFailure OnFailure
}

// Ordered reports whether the type's events of one key are relayed in
// order (Ordering is OrderingKey).
func (e EventConfig) Ordered() bool { return e.Ordering == OrderingKey }

// Backoff is the resolved retry backoff of an event type.
type Backoff struct {
	Enabled    bool
	Delay      time.Duration
	Multiplier float64
}

// RetryDelay returns the delay before retry number retry (1 for the first
// retry): Delay × Multiplier^(retry-1), or 0 when backoff is disabled. With the
// defaults: 10s, 30s, 90s. A delay that does not fit in a time.Duration, or a
// NaN multiplier (which Validate refuses), gives the largest time.Duration.
func (b Backoff) RetryDelay(retry int) time.Duration {
	if !b.Enabled || retry < 1 {
		return 0
	}
	d := float64(b.Delay)
	for i := 1; i < retry && d < float64(maxDuration); i++ {
		d *= b.Multiplier
	}
	// float64(maxDuration) rounds up to 2^63, which converts to the most
	// negative time.Duration: only a d strictly below it converts safely.
	// Written as a negation so that NaN saturates too.
	if !(d < float64(maxDuration)) {
		return maxDuration
	}
	return time.Duration(d)
}

const maxDuration = time.Duration(1<<63 - 1)

// Bool returns a pointer to b, for the optional fields of [EventSettings].
func Bool(b bool) *bool { return &b }

// Int returns a pointer to n, for the optional fields of [EventSettings].
func Int(n int) *int { return &n }

// WithDefaults returns a copy of c with every unset field of the defaults
// block and of the other sections set to its default. The per-event-type
// overrides are left as they are: they inherit at resolution time.
func (c Config) WithDefaults() Config {
	c.Outbox.Defaults = c.Outbox.Defaults.withDefaults()
	if c.Outbox.MaxBatchProcessingTime == 0 {
		c.Outbox.MaxBatchProcessingTime = DefaultMaxBatchProcessingTime
	}
	if c.Outbox.MaxPayloadSize == 0 {
		c.Outbox.MaxPayloadSize = DefaultMaxPayloadSize
	}
	if c.Outbox.MaxDiscoveredTypes == 0 {
		c.Outbox.MaxDiscoveredTypes = DefaultMaxDiscoveredTypes
	}
	c.Outbox.CleanUp = c.Outbox.CleanUp.withDefaults(DefaultOutboxTTL)
	c.Outbox.Partitions = c.Outbox.Partitions.withDefaults() // config_partitions.go
	if c.Outbox.Finalize == "" {
		c.Outbox.Finalize = FinalizeMark
	}
	c.Outbox.DLQ.CleanUp = c.Outbox.DLQ.CleanUp.withDefaults(DefaultDLQTTL)
	c.Inbox.CleanUp = c.Inbox.CleanUp.withDefaults(DefaultInboxTTL)
	if c.Inbox.Cache.TTL == 0 {
		c.Inbox.Cache.TTL = min(DefaultCacheTTL, c.Inbox.CleanUp.TTL)
	}
	if c.Inbox.Cache.Size == 0 {
		c.Inbox.Cache.Size = DefaultCacheSize
	}
	c.Inbox.Retry = c.Inbox.Retry.withDefaults()
	// Copy the map so that the caller's config is never aliased.
	if c.Outbox.Events != nil {
		events := make(map[string]EventSettings, len(c.Outbox.Events))
		for k, v := range c.Outbox.Events {
			events[k] = v
		}
		c.Outbox.Events = events
	}
	return c
}

// withDefaults returns the defaults block with every unset field set to
// its package default.
func (d EventSettings) withDefaults() EventSettings {
	if d.BatchSize == 0 {
		d.BatchSize = DefaultBatchSize
	}
	if d.Polling.Type == "" {
		d.Polling.Type = PollingAdaptive
	}
	if d.Polling.MinFixedDelay == 0 {
		d.Polling.MinFixedDelay = DefaultMinFixedDelay
	}
	if d.Polling.MaxFixedDelay == 0 {
		d.Polling.MaxFixedDelay = DefaultMaxFixedDelay
	}
	if d.Polling.Multiplier == 0 {
		d.Polling.Multiplier = DefaultPollingMultiplier
	}
	if d.MaxRetries == nil {
		d.MaxRetries = Int(DefaultMaxRetries)
	}
	if d.Backoff.Enabled == nil {
		d.Backoff.Enabled = Bool(true)
	}
	if d.Backoff.Delay == 0 {
		d.Backoff.Delay = DefaultBackoffDelay
	}
	if d.Backoff.Multiplier == 0 {
		d.Backoff.Multiplier = DefaultBackoffMultiplier
	}
	if d.Ordering == "" {
		d.Ordering = OrderingNone
	}
	if d.OnFailure == "" {
		d.OnFailure = OnFailureSkip
	}
	return d
}

func (r RetryConfig) withDefaults() RetryConfig {
	if r.MaxRetries == nil {
		r.MaxRetries = Int(DefaultConsumerRetries)
	}
	if r.InitialInterval == 0 {
		r.InitialInterval = DefaultRetryInitialInterval
	}
	if r.MaxInterval == 0 {
		r.MaxInterval = max(DefaultRetryMaxInterval, r.InitialInterval)
	}
	if r.Multiplier == 0 {
		r.Multiplier = DefaultRetryMultiplier
	}
	return r
}

func (r RetryConfig) validate(path string) error {
	var errs []error
	if r.MaxRetries != nil && (*r.MaxRetries < 0 || *r.MaxRetries > MaxRetriesLimit) {
		errs = append(errs, fieldErr(path+".max-retries", "must be between 0 and %d, got %d", MaxRetriesLimit, *r.MaxRetries))
	}
	errs = append(errs,
		validateDelay(path+".initial-interval", r.InitialInterval),
		validateDelay(path+".max-interval", r.MaxInterval),
		validateMultiplier(path+".multiplier", r.Multiplier))
	if r.InitialInterval > 0 && r.MaxInterval > 0 && r.MaxInterval < r.InitialInterval {
		errs = append(errs, fieldErr(path+".max-interval", "%s is shorter than initial-interval %s", r.MaxInterval, r.InitialInterval))
	}
	return errors.Join(errs...)
}

func (c CleanUpConfig) withDefaults(ttl time.Duration) CleanUpConfig {
	if c.TTL == 0 {
		c.TTL = ttl
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultCleanUpBatchSize
	}
	return c
}

// EventTypes returns the configured event types, sorted.
func (c Config) EventTypes() []string {
	types := make([]string, 0, len(c.Outbox.Events))
	for t := range c.Outbox.Events {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// Event resolves the configuration of eventType: its overrides on top of the
// defaults block, on top of the package defaults. A type not in
// outbox.events resolves to the defaults (topic: the type's name), unless
// outbox.strict-event-types is set: then it returns ErrUnknownEventType.
//
// It costs the same whatever the number of types: it reads the map and
// copies nothing (Validate, poller.New and the relay call it per type).
func (c Config) Event(eventType string) (EventConfig, error) {
	o, ok := c.Outbox.Events[eventType]
	if !ok && c.Outbox.StrictEventTypes {
		return EventConfig{}, fmt.Errorf("%w: %q is not in outbox.events (configured: %s)",
			ErrUnknownEventType, eventType, listTypes(c.EventTypes()))
	}
	d := c.Outbox.Defaults.withDefaults()
	ec := EventConfig{
		EventType:  eventType,
		Topic:      firstNonZero(o.Topic, d.Topic, eventType),
		BatchSize:  firstNonZero(o.BatchSize, d.BatchSize),
		MaxRetries: *firstNonNil(o.MaxRetries, d.MaxRetries),
		Polling: PollingSettings{
			Type:          firstNonZero(o.Polling.Type, d.Polling.Type),
			MinFixedDelay: firstNonZero(o.Polling.MinFixedDelay, d.Polling.MinFixedDelay),
			MaxFixedDelay: firstNonZero(o.Polling.MaxFixedDelay, d.Polling.MaxFixedDelay),
			Multiplier:    firstNonZero(o.Polling.Multiplier, d.Polling.Multiplier),
		},
		Backoff: Backoff{
			Enabled:    *firstNonNil(o.Backoff.Enabled, d.Backoff.Enabled),
			Delay:      firstNonZero(o.Backoff.Delay, d.Backoff.Delay),
			Multiplier: firstNonZero(o.Backoff.Multiplier, d.Backoff.Multiplier),
		},
		Ordering:  firstNonZero(o.Ordering, d.Ordering),
		OnFailure: firstNonZero(o.OnFailure, d.OnFailure),
	}
	return ec, nil
}

func firstNonZero[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}

func firstNonNil[T any](vs ...*T) *T {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

var identifierRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// databaseName is the form of a database's name in the configuration.
var databaseName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// maxIdentifierLength keeps prefixed table names within every dialect's
// limit (PostgreSQL 63, MySQL 64, Oracle 128 bytes): the longest table name
// is "outbox_dlq_events" (17 characters).
const maxIdentifierLength = 40

// Validate checks the table placement; the error names the field. The
// schema must be a plain identifier and no reserved word of SQL:2016,
// PostgreSQL, MySQL/MariaDB or Oracle, in any case: the dialects write it
// unquoted. The prefix needs no such check: every name it forms ends with
// a fixed oncebox suffix ("outbox_events", …) that no engine reserves.
func (t TablesConfig) Validate() error {
	var errs []error
	if t.Schema != "" && (!identifierRE.MatchString(t.Schema) || len(t.Schema) > 63) {
		errs = append(errs, fieldErr("tables.schema", "%q is not a plain identifier (letters, digits, underscores, at most 63)", t.Schema))
	} else if by := reservedBy(t.Schema); by != nil {
		errs = append(errs, fieldErr("tables.schema", "%q is a reserved word (%s): it cannot name a schema unquoted; choose another name",
			t.Schema, strings.Join(by, ", ")))
	}
	if t.Prefix != "" && (!identifierRE.MatchString(t.Prefix) || len(t.Prefix) > maxIdentifierLength) {
		errs = append(errs, fieldErr("tables.prefix", "%q is not a plain identifier (letters, digits, underscores, at most %d)", t.Prefix, maxIdentifierLength))
	}
	return errors.Join(errs...)
}

// Validate checks c after defaults are applied and returns every problem
// found, each naming its field by its YAML path, all wrapping
// ErrInvalidConfig. Call it on the result of WithDefaults.
func (c Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxConcurrentQueries < 0 {
		add(fieldErr("thread-pool-size", "must be >= 0, got %d", c.MaxConcurrentQueries))
	}
	// Which names are databases is the registry's to say
	// (dialects/registry, which this package cannot import): the service
	// and the CLI check the name against it. Here only its form.
	if c.Database != "" && !databaseName.MatchString(c.Database) {
		add(fieldErr("database", "must be a database's name in lower case (postgres, mysql, …) or empty, got %q", c.Database))
	}
	add(c.Tables.Validate())
	add(validateBrokerType("outbox.sender.type", c.Outbox.Sender.Type))
	add(validateBrokerType("inbox.source.type", c.Inbox.Source.Type))
	add(c.Outbox.Defaults.validate("outbox.defaults", true))
	if d := c.Outbox.Defaults; d.MaxRetries != nil && d.Backoff.Enabled != nil {
		add(validateBackoff("outbox.defaults.backoff",
			Backoff{Enabled: *d.Backoff.Enabled, Delay: d.Backoff.Delay, Multiplier: d.Backoff.Multiplier}, *d.MaxRetries))
	}
	// One pass over the types, each resolved on its own: Event copies
	// nothing, so this is linear in the number of types.
	for _, t := range c.EventTypes() {
		path := eventPath(t)
		add(validateEventType(path, t))
		o := c.Outbox.Events[t]
		add(o.validate(path, false))
		// A type may be valid on its own and invalid once merged (its min
		// above the inherited max): check the resolved values too.
		if ec, err := c.Event(t); err == nil {
			add(ec.Polling.validateResolved(path + ".polling"))
			// A type that sets none of these inherits the defaults'
			// backoff, already checked.
			if o.MaxRetries != nil || o.Backoff != (BackoffSettings{}) {
				add(validateBackoff(path+".backoff", ec.Backoff, ec.MaxRetries))
			}
			if o.OnFailure != "" || o.Ordering != "" {
				add(validateOnFailure(path, ec.Ordering, ec.OnFailure))
			}
		}
	}
	add(validateOnFailure("outbox.defaults", c.Outbox.Defaults.Ordering, c.Outbox.Defaults.OnFailure))
	if c.Outbox.StrictEventTypes && len(c.Outbox.Events) == 0 {
		add(fieldErr("outbox.strict-event-types", "limits the outbox to outbox.events, which is empty: every publish would be refused"))
	}
	if c.Outbox.MaxBatchProcessingTime <= 0 {
		add(fieldErr("outbox.max-batch-processing-time", "must be > 0, got %s", c.Outbox.MaxBatchProcessingTime))
	}
	if c.Outbox.MaxPayloadSize <= 0 {
		add(fieldErr("outbox.max-payload-size", "must be > 0, got %d", c.Outbox.MaxPayloadSize))
	}
	if c.Outbox.MaxDiscoveredTypes < 1 || c.Outbox.MaxDiscoveredTypes > MaxDiscoveredTypesLimit {
		add(fieldErr("outbox.max-discovered-types", "must be between 1 and %d, got %d", MaxDiscoveredTypesLimit, c.Outbox.MaxDiscoveredTypes))
	}
	add(c.Outbox.CleanUp.validate("outbox.clean-up"))
	add(c.Outbox.Partitions.validate("outbox.partitions")) // config_partitions.go
	add(validateFinalize("outbox.finalize", c.Outbox.Finalize))
	add(c.Outbox.DLQ.CleanUp.validate("outbox.dlq.clean-up"))
	add(c.Inbox.CleanUp.validate("inbox.clean-up"))
	if c.Inbox.Cache.Enabled && c.Inbox.Cache.CacheName == "" {
		add(fieldErr("inbox.cache.cache-name", "is required when the cache is enabled, and must be unique per service"))
	}
	if c.Inbox.Cache.Size < 0 {
		add(fieldErr("inbox.cache.size", "must be > 0, got %d", c.Inbox.Cache.Size))
	}
	add(c.Inbox.Retry.validate("inbox.retry"))
	if c.Inbox.Enabled && !c.Outbox.DLQ.Enabled {
		add(fieldErr("outbox.dlq.enabled", "must be true when inbox.enabled is: the poison queue parks failed messages in the DLQ table, and only the relay's DLQ jobs send a retried one back"))
	}
	if c.Inbox.Cache.TTL < 0 {
		add(fieldErr("inbox.cache.ttl", "must be > 0, got %s", c.Inbox.Cache.TTL))
	}
	if c.Inbox.Cache.TTL > c.Inbox.CleanUp.TTL {
		add(fieldErr("inbox.cache.ttl", "%s is longer than inbox.clean-up.ttl %s: the cache would answer for ids the inbox table has forgotten",
			c.Inbox.Cache.TTL, c.Inbox.CleanUp.TTL))
	}
	return errors.Join(errs...)
}

func (s EventSettings) validate(path string, isDefaults bool) error {
	var errs []error
	if len(s.Topic) > MaxEventTypeLength {
		errs = append(errs, fieldErr(path+".topic", "longer than %d characters", MaxEventTypeLength))
	} else if problem := checkName(s.Topic); problem != "" {
		errs = append(errs, fieldErr(path+".topic", "%s", problem))
	}
	if s.BatchSize < 0 || s.BatchSize > MaxBatchSize || (isDefaults && s.BatchSize == 0) {
		errs = append(errs, fieldErr(path+".batch-size", "must be between 1 and %d, got %d", MaxBatchSize, s.BatchSize))
	}
	p := s.Polling
	switch p.Type {
	case "", PollingAdaptive, PollingFixed:
	default:
		errs = append(errs, fieldErr(path+".polling.type", "must be %q or %q, got %q", PollingAdaptive, PollingFixed, p.Type))
	}
	errs = append(errs,
		validateDelay(path+".polling.min-fixed-delay", p.MinFixedDelay),
		validateDelay(path+".polling.max-fixed-delay", p.MaxFixedDelay),
		validateMultiplier(path+".polling.multiplier", p.Multiplier))
	if isDefaults {
		errs = append(errs, p.validateResolved(path+".polling"))
	}
	if s.MaxRetries != nil && *s.MaxRetries < 0 {
		errs = append(errs, fieldErr(path+".max-retries", "must be >= 0, got %d", *s.MaxRetries))
	}
	if s.MaxRetries != nil && *s.MaxRetries > MaxRetriesLimit {
		errs = append(errs, fieldErr(path+".max-retries", "must be at most %d, got %d", MaxRetriesLimit, *s.MaxRetries))
	}
	errs = append(errs,
		validateDelay(path+".backoff.delay", s.Backoff.Delay),
		validateMultiplier(path+".backoff.multiplier", s.Backoff.Multiplier))
	switch s.Ordering {
	case "", OrderingNone, OrderingKey:
	default:
		errs = append(errs, fieldErr(path+".ordering", "must be %q or %q, got %q", OrderingKey, OrderingNone, s.Ordering))
	}
	switch s.OnFailure {
	case "", OnFailureSkip, OnFailureBlock:
	default:
		errs = append(errs, fieldErr(path+".on-failure", "must be %q or %q, got %q", OnFailureSkip, OnFailureBlock, s.OnFailure))
	}
	return errors.Join(errs...)
}

// validateOnFailure refuses on-failure: block on a type that is not
// ordered: there is no key order for it to keep, and the setting would be
// silently ignored.
func validateOnFailure(path string, o Ordering, f OnFailure) error {
	if f == OnFailureBlock && o != OrderingKey {
		return fieldErr(path+".on-failure", "%q needs ordering: %q (ordering is %q)", f, OrderingKey, o)
	}
	return nil
}

// validateDelay checks a delay that 0 leaves to the defaults.
func validateDelay(path string, d time.Duration) error {
	switch {
	case d < 0:
		return fieldErr(path, "must be > 0, got %s", d)
	case d > 0 && d < MinDelay:
		return fieldErr(path, "must be at least %s, got %s", MinDelay, d)
	}
	return nil
}

// validateMultiplier checks a multiplier that 0 leaves to the defaults.
// NaN passes every comparison, so it is refused before them; YAML spells
// it .nan and infinity .inf.
func validateMultiplier(path string, m float64) error {
	switch {
	case math.IsNaN(m) || math.IsInf(m, 0):
		return fieldErr(path, "must be a finite number, got %g", m)
	case m != 0 && m < 1:
		return fieldErr(path, "must be >= 1, got %g", m)
	}
	return nil
}

// validateBackoff checks the longest delay of a resolved backoff, the one
// before the last retry, against MaxRetryDelay. It reports nothing when an
// input is invalid on its own (already reported) or the backoff is off.
func validateBackoff(path string, b Backoff, maxRetries int) error {
	if !b.Enabled || maxRetries < 1 || maxRetries > MaxRetriesLimit || b.Delay <= 0 ||
		validateMultiplier("", b.Multiplier) != nil {
		return nil
	}
	// Computed in float64, where 1,000 growths of a finite multiplier
	// overflow to +Inf at worst, never wrap.
	d := float64(b.Delay)
	for i := 1; i < maxRetries && d <= float64(MaxRetryDelay); i++ {
		d *= b.Multiplier
	}
	if d > float64(MaxRetryDelay) {
		return fieldErr(path, "the delay before retry %d (%s × %g^%d) is longer than %s; lower backoff.delay, backoff.multiplier or max-retries",
			maxRetries, b.Delay, b.Multiplier, maxRetries-1, MaxRetryDelay)
	}
	return nil
}

// validateResolved checks the relations between the merged polling values.
func (p PollingSettings) validateResolved(path string) error {
	if p.Type == PollingAdaptive && p.MinFixedDelay > 0 && p.MaxFixedDelay > 0 && p.MinFixedDelay > p.MaxFixedDelay {
		return fieldErr(path+".min-fixed-delay", "%s is greater than max-fixed-delay %s", p.MinFixedDelay, p.MaxFixedDelay)
	}
	return nil
}

func (c CleanUpConfig) validate(path string) error {
	var errs []error
	if c.TTL <= 0 {
		errs = append(errs, fieldErr(path+".ttl", "must be > 0, got %s", c.TTL))
	}
	if c.BatchSize <= 0 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fieldErr(path+".batch-size", "must be between 1 and %d, got %d", MaxBatchSize, c.BatchSize))
	}
	return errors.Join(errs...)
}

func validateBrokerType(path, t string) error {
	switch t {
	case "", "kafka", "rabbitmq":
		return nil
	}
	return fieldErr(path, "must be \"kafka\", \"rabbitmq\" or empty, got %q", t)
}

// eventPath is the YAML path of the settings of eventType; a type with a
// control character, invalid UTF-8 or over MaxEventTypeLength is quoted
// (and cut) in it.
func eventPath(eventType string) string { return "outbox.events." + displayKey(eventType) }

// validateEventType checks an event type's name: 1 to MaxEventTypeLength
// bytes of valid UTF-8 with no control character. The name is stored in a
// text column: PostgreSQL refuses a NUL in text, and the failed insert
// aborts the caller's business transaction.
func validateEventType(path, t string) error {
	if t == "" || len(t) > MaxEventTypeLength {
		return fieldErr(path, "event type must be 1 to %d characters", MaxEventTypeLength)
	}
	if problem := checkName(t); problem != "" {
		return fieldErr(path, "event type %s", problem)
	}
	return nil
}

// checkName says what makes s unfit to name an event type or a topic: invalid
// UTF-8, or a control character (C0, DEL or C1: a NUL, a tab, a newline…);
// "" when it is fit.
func checkName(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %U at byte %d", r, i)
		}
	}
	return ""
}

// listTypes lists event types for an error, the first ten of them.
func listTypes(types []string) string {
	const shown = 10
	if len(types) <= shown {
		return strings.Join(types, ", ")
	}
	return fmt.Sprintf("%s, … (%d in all)", strings.Join(types[:shown], ", "), len(types))
}

// FieldError is a configuration error about one field, named by its YAML
// path (for example "outbox.events.low-priority.polling.multiplier").
type FieldError struct {
	Field   string
	Message string
	// Line is the line of the field in the YAML document it was loaded
	// from (LoadConfig), or 0.
	Line int
}

// Error returns "oncebox: config <field>: <message>", followed by
// " (line N)" when the field was read from a document.
func (e *FieldError) Error() string {
	if e.Line > 0 {
		// Last, so that "field: message" reads the same from a file as
		// from Go.
		return "oncebox: config " + e.Field + ": " + e.Message + " (line " + strconv.Itoa(e.Line) + ")"
	}
	return "oncebox: config " + e.Field + ": " + e.Message
}

// Unwrap makes every FieldError match ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}
