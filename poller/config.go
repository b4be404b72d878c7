package poller

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/pacing"
)

// Config configures a Poller.
type Config struct {
	// Dialect builds the SQL. Required.
	Dialect dialects.Dialect
	// Oncebox is the oncebox configuration: the event types and their
	// settings (outbox.events inheriting outbox.defaults), the DLQ, the
	// clean-up and max-batch-processing-time.
	Oncebox oncebox.Config
	// EventTypes lists types to poll with a loop of their own, as if they
	// were in Oncebox.Outbox.Events, when that map is empty; they take the
	// defaults block. Ignored otherwise. Types neither here nor there are
	// still relayed, through discovery, unless
	// Oncebox.Outbox.StrictEventTypes (which needs one of the two to name a
	// type).
	EventTypes []string
	// MaxDiscoveredTypes bounds how many types nobody configured get a loop
	// of their own at once (discovery: see Poller); more due types take
	// turns. Default: Oncebox.Outbox.MaxDiscoveredTypes (YAML
	// outbox.max-discovered-types, default 100).
	MaxDiscoveredTypes int
	// InstanceID names this instance in the leases of the jobs table.
	// Default: hostname-pid-random.
	InstanceID string
	// Clock drives every delay and timestamp of the relay's work. Nil means
	// the real clock; tests pass a fake one (see oncebox.Clock).
	// CloseTimeout and FinalizeTimeout are always real time: they bound a
	// shutdown, not the work.
	Clock oncebox.Clock
	// CloseTimeout bounds how long Close waits for batches in flight before
	// cancelling their sends and releasing their rows. Default 30s.
	CloseTimeout time.Duration
	// FinalizeTimeout bounds each statement that records the outcome of a
	// batch, which runs even while closing. Default 10s.
	FinalizeTimeout time.Duration
	// MaxBatchesInFlight bounds the batches of one event type held at once
	// (claimed and not yet finalized) while a backlog drains: the next
	// batch is claimed while those before are sent and finalized, and the
	// finalizes that are ready together are merged (one commit).
	// Sends of a type stay one at a time, in claim order. 1 turns the
	// pipelining off (claim, send, finalize in turn). Memory: up to
	// MaxBatchesInFlight × batch-size rows per type. Default 3.
	MaxBatchesInFlight int
	// MaxConcurrentQueries bounds the goroutines that use a database
	// connection at once for the claims, finalizes, discovery and jobs.
	// Default: Oncebox.MaxConcurrentQueries (YAML thread-pool-size), or else
	// 2 + n (5 + n with the DLQ) for n event types, one more with
	// discovery: one connection for each goroutine of the relay that may
	// hold one. The heartbeat and the recovery take no slot: they
	// run on one connection of their own, so that they never wait behind
	// the claims and finalizes of busy types (a live instance whose
	// heartbeat waited past HeartbeatTimeout would see its claims
	// recovered by another). The relay so uses up to MaxConcurrentQueries
	// + 1 connections (+ 1 for the Listener): size the pool for that.
	MaxConcurrentQueries int
	// IsUnavailable tells whether a publish error means the broker cannot be
	// reached: the batch is then released without counting an attempt and
	// the type backs off. Default: the package's IsUnavailable, which knows
	// oncebox.ErrBrokerUnavailable, network and deadline errors, and the
	// errors of the recognisers registered with RegisterUnavailable (the
	// kafka module's for watermill-kafka's publisher, Sarama; the rabbitmq
	// module's for watermill-amqp's, amqp091-go); wrap it to add the errors
	// of another client.
	IsUnavailable func(error) bool
	// Hooks receives the poller's events. Default: NopHooks.
	Hooks Hooks
	// OutageBackoff paces an event type while its broker is unavailable:
	// after a batch was released because the broker could not be reached,
	// the type waits at least Min, then Min × Multiplier, … up to Max, until
	// a batch reaches the broker again. With a publisher that implements
	// BrokerProber the waits are spent probing, not claiming. Default: min
	// 1s, max 30s, ×2 (Max bounds how late a type notices that the broker
	// is back).
	OutageBackoff Schedule
	// Recovery paces the recovery while this instance holds no claims and
	// its last run saw no row IN_PROCESS. Default: min
	// max-batch-processing-time/5, max max-batch-processing-time, ×2: a
	// stuck row is sent again at most two max-batch-processing-times after
	// its claim. Otherwise the recovery runs every Heartbeat.
	Recovery Schedule
	// Heartbeat is how often an instance that holds claims (batches in
	// flight for longer than this) writes its heartbeat, and how often an
	// instance that holds claims, or whose last recovery run saw a row
	// IN_PROCESS, runs the recovery. An instance that holds no claims
	// writes nothing. Default 3s, or HeartbeatTimeout/4 when that is
	// shorter.
	Heartbeat time.Duration
	// HeartbeatTimeout is how old the heartbeat of the instance holding a
	// claim may be before the recovery returns the claim to PENDING: a dead
	// instance's batches are sent again between HeartbeatTimeout and
	// HeartbeatTimeout + Heartbeat after its last heartbeat (12s to 15s by
	// default), instead of after max-batch-processing-time. A live
	// instance's claims are still recovered after
	// max-batch-processing-time. At least twice Heartbeat; instances'
	// clocks must agree within HeartbeatTimeout − Heartbeat, or a live
	// instance's claim may be sent twice (never lost): MaxClockOffset
	// checks it against the database's clock. Default 12s, or
	// max-batch-processing-time when that is shorter.
	HeartbeatTimeout time.Duration
	// MaxClockOffset bounds how far this relay's clock (Clock) may be from
	// the database's. Staleness is judged with the writers' clocks
	// (claimed_at and heartbeat_at are written with the clock of the
	// instance that holds the claim and compared with the recovering
	// instance's), so clocks that disagree by more than HeartbeatTimeout −
	// Heartbeat can make a live instance's claim look dead. The relay
	// measures its offset from the database's clock at Run (one statement)
	// and on every recovery run (read by the recovery's own statement, no
	// statement more), taking the middle of the round trip. Beyond the
	// bound Run refuses to start, naming the offset; once running, an
	// offset that crosses it is logged at ERROR once (and once more when
	// it is back within), and every reading goes to Hooks.ClockOffset.
	// Default (HeartbeatTimeout − Heartbeat)/2 (4.5s): each instance within
	// half of it of the database keeps every two within it. Negative
	// disables the check. With a Clock given (a test's fake clock, whose
	// time is its own) the check is off unless MaxClockOffset is set.
	MaxClockOffset time.Duration
	// DLQTransfer paces the DLQ transfer, which a poll that marks a row
	// FAILED also wakes at once. Default: min 10s, max 1h, ×2.
	DLQTransfer Schedule
	// DLQRetry paces the transfer of TO_RETRY DLQ rows back to the outbox
	// (when the DLQ is enabled). Default: min 10s, max 1h, ×2; a DLQ retry
	// wakes the job at once where it can (PostgreSQL with a listener, or
	// package inprocess in one process), and where the relay cannot hear
	// other processes' retries a defaulted Max is cut to 10s
	// (dlq.UnwokenPickupBound), so that a retry waits at most that long.
	DLQRetry Schedule
	// CleanUp paces the outbox clean-up and, when the DLQ is enabled, the
	// clean-up of RESOLVED DLQ rows. Default: min 5m, max 1h, ×2.
	CleanUp Schedule
	// CleanUpLease is the longest a clean-up lease ("outbox-clean-up",
	// "dlq-clean-up") is held (at-most); after a crash another instance may
	// take it then. Default 10m. The lease is kept at least CleanUp.Min after
	// a run (at-least).
	CleanUpLease time.Duration
	// JobBatchSize is the most rows a recovery, DLQ transfer or DLQ retry
	// statement touches. Default 1000.
	JobBatchSize int
	// TracerProvider starts the relay's spans: one "oncebox.relay send
	// <topic>" span (kind Producer) per topic of each batch sent, linked to
	// the producers' stored trace contexts (see docs/tracing.md). Default:
	// otel.GetTracerProvider(), a no-op until a global provider is set.
	TracerProvider trace.TracerProvider
	// Propagator reads the producers' trace contexts from the stored
	// metadata for the links. It must match the publisher's. Default:
	// otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator

	// Wake-up on commit (poller/wake.go, docs/design.md).

	// Listener receives the notifications the publisher sends when a
	// transaction that wrote events commits; each wakes the loop of its
	// event type at once (or the discovery, for a type without a running
	// loop), so an event is relayed milliseconds after its commit rather
	// than at the end of the loop's sleep (up to max-fixed-delay). The poller
	// holds one connection for it. Default: PgxListener over db's pool when
	// db is sql.BeginnerFromPgx(*pgxpool.Pool) on PostgreSQL; nil otherwise
	// (database/sql, MySQL/MariaDB, Oracle): polling only.
	Listener Listener
	// DisableWakeOnCommit turns the listener off, whatever Listener says:
	// the relay polls only. Default false.
	DisableWakeOnCommit bool
	// ListenerBackoff paces the reconnection of a lost listener connection
	// (real time). The loops keep polling at their pace meanwhile. Default:
	// min 100ms, max 30s, ×2.
	ListenerBackoff Schedule
}

// The defaults of the heartbeat: a dead instance's claims are recovered
// 12s to 15s after its last heartbeat.
const (
	defaultHeartbeat        = 3 * time.Second
	defaultHeartbeatTimeout = 12 * time.Second
)

// The bounds of Config.MaxBatchesInFlight: the default, and the most rows a
// type may hold, in batches.
const (
	defaultMaxBatchesInFlight = 3
	maxBatchesInFlight        = 16
)

// maxInstanceIDLength is the width of claimed_by and of the instances
// table's key, in bytes.
const maxInstanceIDLength = 255

// Schedule is the adaptive pace of a background job: after a run that found
// work it waits Min, otherwise its delay grows by Multiplier up to Max.
type Schedule = pacing.Schedule

// Validate checks c as New does, zero fields taking their defaults: the
// dialect, the oncebox configuration, the event types and every duration
// and bound. The error names every field at fault and wraps
// oncebox.ErrInvalidConfig.
func (c Config) Validate() error {
	_, err := c.withDefaults().validate()
	return err
}

// eventTypes are the configured event types: Oncebox's, else EventTypes.
func (c Config) eventTypes() []string {
	if types := c.Oncebox.EventTypes(); len(types) > 0 {
		return types
	}
	return c.EventTypes
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	c.Oncebox = c.Oncebox.WithDefaults()
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		id, _ := oncebox.NewEventID() // fails only if crypto/rand does, which Go treats as fatal
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), id.String()[24:])
	}
	realClock := c.Clock == nil
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
	if c.FinalizeTimeout == 0 {
		c.FinalizeTimeout = 10 * time.Second
	}
	if c.MaxConcurrentQueries == 0 {
		c.MaxConcurrentQueries = c.Oncebox.MaxConcurrentQueries
	}
	if c.MaxConcurrentQueries == 0 {
		// One more for discovery and the loops of the types it finds, which
		// share it with the configured ones.
		n := len(c.eventTypes())
		if !c.Oncebox.Outbox.StrictEventTypes {
			n++
		}
		c.MaxConcurrentQueries = 2 + n
		if c.Oncebox.Outbox.DLQ.Enabled {
			c.MaxConcurrentQueries = 5 + n
		}
	}
	if c.MaxDiscoveredTypes == 0 {
		c.MaxDiscoveredTypes = c.Oncebox.Outbox.MaxDiscoveredTypes
	}
	if c.MaxBatchesInFlight == 0 {
		c.MaxBatchesInFlight = defaultMaxBatchesInFlight
	}
	if c.IsUnavailable == nil {
		c.IsUnavailable = IsUnavailable
	}
	if c.Hooks == nil {
		c.Hooks = NopHooks{}
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	mbpt := c.Oncebox.Outbox.MaxBatchProcessingTime
	c.OutageBackoff = c.OutageBackoff.WithDefaults(Schedule{Min: time.Second, Max: 30 * time.Second, Multiplier: 2})
	c.Recovery = c.Recovery.WithDefaults(Schedule{Min: mbpt / 5, Max: mbpt, Multiplier: 2})
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = min(defaultHeartbeatTimeout, mbpt)
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = min(defaultHeartbeat, c.HeartbeatTimeout/4)
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = -1 // a given clock's time is its own: no check
		if realClock {
			c.MaxClockOffset = (c.HeartbeatTimeout - c.Heartbeat) / 2
		}
	}
	c.DLQTransfer = c.DLQTransfer.WithDefaults(Schedule{Min: 10 * time.Second, Max: time.Hour, Multiplier: 2})
	c.DLQRetry = c.DLQRetry.WithDefaults(Schedule{Min: 10 * time.Second, Max: time.Hour, Multiplier: 2})
	c.CleanUp = c.CleanUp.WithDefaults(Schedule{Min: 5 * time.Minute, Max: time.Hour, Multiplier: 2})
	c.ListenerBackoff = c.ListenerBackoff.WithDefaults(Schedule{Min: 100 * time.Millisecond, Max: 30 * time.Second, Multiplier: 2})
	if c.CleanUpLease == 0 {
		c.CleanUpLease = 10 * time.Minute
	}
	if c.JobBatchSize == 0 {
		c.JobBatchSize = 1000
	}
	return c
}

// validate checks c, its defaults filled, and resolves the event types'
// settings.
func (c Config) validate() ([]oncebox.EventConfig, error) {
	if c.Dialect == nil {
		return nil, fmt.Errorf("%w: poller: Config.Dialect is nil", oncebox.ErrInvalidConfig)
	}
	if err := c.Oncebox.Validate(); err != nil {
		return nil, err
	}
	types := c.eventTypes()
	if len(types) == 0 && c.Oncebox.Outbox.StrictEventTypes {
		return nil, fmt.Errorf("%w: poller: no event types: set Oncebox.Outbox.Events or Config.EventTypes", oncebox.ErrInvalidConfig)
	}
	events := make([]oncebox.EventConfig, 0, len(types))
	seen := map[string]bool{}
	for _, t := range types {
		if t == "" || len(t) > oncebox.MaxEventTypeLength {
			return nil, fmt.Errorf("%w: poller: event type %q must be 1 to %d characters", oncebox.ErrInvalidConfig, t, oncebox.MaxEventTypeLength)
		}
		if seen[t] {
			return nil, fmt.Errorf("%w: poller: event type %q listed twice", oncebox.ErrInvalidConfig, t)
		}
		seen[t] = true
		ec, err := c.Oncebox.Event(t)
		if err != nil {
			return nil, err
		}
		events = append(events, ec)
	}
	var errs []error
	if c.CloseTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: poller: CloseTimeout must be > 0, got %s", oncebox.ErrInvalidConfig, c.CloseTimeout))
	}
	if c.FinalizeTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: poller: FinalizeTimeout must be > 0, got %s", oncebox.ErrInvalidConfig, c.FinalizeTimeout))
	}
	if c.MaxConcurrentQueries < 0 {
		errs = append(errs, fmt.Errorf("%w: poller: MaxConcurrentQueries must be > 0, got %d", oncebox.ErrInvalidConfig, c.MaxConcurrentQueries))
	}
	if c.MaxBatchesInFlight < 0 || c.MaxBatchesInFlight > maxBatchesInFlight {
		errs = append(errs, fmt.Errorf("%w: poller: MaxBatchesInFlight must be between 1 and %d, got %d", oncebox.ErrInvalidConfig, maxBatchesInFlight, c.MaxBatchesInFlight))
	}
	if c.MaxDiscoveredTypes < 0 || c.MaxDiscoveredTypes > oncebox.MaxDiscoveredTypesLimit {
		errs = append(errs, fmt.Errorf("%w: poller: MaxDiscoveredTypes must be between 1 and %d, got %d", oncebox.ErrInvalidConfig, oncebox.MaxDiscoveredTypesLimit, c.MaxDiscoveredTypes))
	}
	if c.JobBatchSize < 0 || c.JobBatchSize > oncebox.MaxBatchSize {
		errs = append(errs, fmt.Errorf("%w: poller: JobBatchSize must be between 1 and %d, got %d", oncebox.ErrInvalidConfig, oncebox.MaxBatchSize, c.JobBatchSize))
	}
	if c.Heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("%w: poller: Heartbeat must be > 0, got %s", oncebox.ErrInvalidConfig, c.Heartbeat))
	}
	if c.HeartbeatTimeout < 2*c.Heartbeat {
		errs = append(errs, fmt.Errorf("%w: poller: HeartbeatTimeout must be at least twice Heartbeat (%s), got %s",
			oncebox.ErrInvalidConfig, c.Heartbeat, c.HeartbeatTimeout))
	}
	if len(c.InstanceID) > maxInstanceIDLength || !utf8.ValidString(c.InstanceID) || strings.ContainsRune(c.InstanceID, 0) {
		// It is stored in claimed_by and the instances table: an id the
		// database refuses would fail every claim.
		errs = append(errs, fmt.Errorf("%w: poller: InstanceID must be valid UTF-8 without NUL, at most %d bytes, got %d bytes",
			oncebox.ErrInvalidConfig, maxInstanceIDLength, len(c.InstanceID)))
	}
	if c.CleanUpLease < 0 {
		errs = append(errs, fmt.Errorf("%w: poller: CleanUpLease must be > 0, got %s", oncebox.ErrInvalidConfig, c.CleanUpLease))
	}
	errs = append(errs, c.OutageBackoff.Validate("poller: OutageBackoff"), c.Recovery.Validate("poller: Recovery"), c.DLQTransfer.Validate("poller: DLQTransfer"),
		c.DLQRetry.Validate("poller: DLQRetry"), c.CleanUp.Validate("poller: CleanUp"), c.ListenerBackoff.Validate("poller: ListenerBackoff"))
	return events, errors.Join(errs...)
}
