// Package publisher writes events to the outbox table inside the caller's
// transaction.
//
// A [Publisher] is a Watermill message.Publisher built over an open
// transaction, the way watermill-sql's publisher is used with
// forwarder.NewPublisher: the event rows commit or roll back with the business
// rows, and the publisher never begins, commits or rolls back anything.
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	// … write the business rows with tx …
//	pub, _ := publisher.NewPublisher(sql.TxFromPgx(tx), publisher.Config{Dialect: pg}, logger)
//	_ = pub.Publish("order-created", message.NewMessage(watermill.NewUUID(), payload))
//	_ = tx.Commit(ctx)
package publisher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/inprocess"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// Config configures a Publisher. Build it once and reuse it for every
// transaction: NewPublisher does no work beyond checking its arguments.
type Config struct {
	// Dialect writes the rows and the wake-up (its OutboxWriter role).
	// Required.
	Dialect dialects.Dialect
	// Oncebox is the oncebox configuration. The publisher reads the event
	// types (when outbox.events is not empty, an unknown type is refused), the
	// destination topic of each type (default: the type itself) and
	// outbox.max-payload-size (default 1 MiB, counting the payload and every
	// metadata key and value). The zero value accepts any
	// event type and publishes it to the topic of the same name.
	Oncebox oncebox.Config
	// Clock gives the creation time of the rows. Nil means the real clock;
	// tests pass a fake one (see oncebox.Clock).
	Clock oncebox.Clock
	// AllowNonTransactionalDangerously lets the publisher write through a
	// handle that is not a transaction (a pool, a *sql.DB): each Publish then
	// commits on its own, and the event is no longer atomic with the business
	// rows. Default false: such a handle is refused with ErrNoTransaction.
	AllowNonTransactionalDangerously bool
	// Propagator writes the trace context of each message's context
	// (msg.Context()) into the stored metadata (with the W3C propagator, the
	// traceparent and tracestate headers), so that the relay can link to it
	// and the consumer continue it; see docs/tracing.md. Nothing is stored
	// when the context carries no valid span, or when the message already
	// has a traceparent header. Default: otel.GetTextMapPropagator(), read
	// at each Publish; while no global propagator is set, that is a no-op
	// and nothing is stored.
	Propagator propagation.TextMapPropagator
	// DisableWakeOnCommit stops the publisher from adding the wake-up
	// notification to the transaction. By default, on PostgreSQL, the first
	// Publish of each event type in a transaction also runs
	// SELECT pg_notify(channel, event type) (dialects.NotifyChannel names
	// the channel after the tables), so that a relay listening on it polls
	// the type as soon as the transaction commits instead of at the end of
	// its sleep (up to max-fixed-delay); see docs/design.md, "Wake-up on
	// commit". MySQL/MariaDB, SQLite and Oracle never notify; on them, when
	// the *sql.DB was opened through package inprocess, the commit wakes
	// the relays of this process instead (the insert's context is marked;
	// DisableWakeOnCommit turns that off too). Default false (on).
	//
	// Set it for a transaction that is committed in two phases:
	// PostgreSQL refuses PREPARE TRANSACTION in a transaction that ran
	// NOTIFY ("cannot PREPARE a transaction that has executed LISTEN,
	// UNLISTEN, or NOTIFY"). Config is a value: build one with it set for
	// those transactions and keep the default for the others.
	DisableWakeOnCommit bool
	// WakeLimit is the least time between two wake-up notifications of one
	// event type on one channel from this process (all the publishers of
	// the process share the limiter): a transaction that publishes within
	// WakeLimit of the last notification does not notify. It bounds how
	// often commits take PostgreSQL's global notification-queue lock.
	// Default 5ms (DefaultWakeLimit); negative: notify in every
	// transaction.
	WakeLimit time.Duration
	// WakeQueueLimit is the usage of PostgreSQL's notification queue
	// (pg_notification_queue_usage(), a share from 0 to 1) at and above
	// which the publisher adds no wake-up notification: a full queue makes
	// every transaction that ran NOTIFY fail at COMMIT, so the wake-up
	// steps aside long before (a skipped notification costs latency only:
	// the relay polls at its pace). Default 0.5 (DefaultWakeQueueLimit);
	// negative: never read the usage; more than 1 is refused by Validate.
	WakeQueueLimit float64
	// WakeQueueCheck is how long one reading of the queue's usage is used:
	// the process reads it at most once per WakeQueueCheck per channel, in
	// the first transaction that notifies after that, never in every
	// transaction. Default 10s (DefaultWakeQueueCheck).
	WakeQueueCheck time.Duration
	// WakeQueueUsage reads the queue's usage; tx is the transaction being
	// published in. Default ReadQueueUsage(Dialect) (one reading of
	// pg_notification_queue_usage() through tx), run under a
	// savepoint so that a failed reading cannot abort the caller's
	// transaction (that transaction then sends no notification); a
	// function given here runs as it is. Tests pass a fake reading.
	WakeQueueUsage func(ctx context.Context, tx sql.ContextExecutor) (float64, error)
	// MaxDelay is the longest delay a delayed event may ask for (Watermill's
	// delay metadata, WithDelay, WithDeliverAt; docs/delay.md): an event
	// due later than MaxDelay after the publisher's clock is refused with
	// an error naming it and the limit, and nothing of the call is
	// written. It catches a wrong unit or a date in the wrong year before
	// a row sits in the outbox for good. Default 30 days (DefaultMaxDelay);
	// negative is refused by Validate.
	MaxDelay time.Duration
}

// Publisher writes messages as outbox rows through the caller's transaction.
// It implements message.Publisher. It is safe for concurrent use to the
// extent the transaction it was built over is (a pgx.Tx or *sql.Tx is not:
// publish from one goroutine at a time).
type Publisher struct {
	db      sql.ContextExecutor
	w       dialects.OutboxWriter // config.Dialect's role
	config  Config
	maxSize int
	logger  watermill.LoggerAdapter

	mu     sync.RWMutex
	closed bool

	notifiedMu sync.Mutex
	notified   map[string]bool // event types this transaction notified
}

var _ message.Publisher = (*Publisher)(nil)

// withDefaults returns c with its zero fields set to their defaults. It is
// cheap: NewPublisher runs it for every transaction.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	return c
}

// Validate checks c, zero fields taking their defaults: the dialect and the
// oncebox configuration (as oncebox.Config.Validate after WithDefaults). The
// error names every field at fault and wraps
// oncebox.ErrInvalidConfig. NewPublisher, which runs for every transaction,
// checks only the dialect: call Validate once at start-up.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Dialect == nil {
		errs = append(errs, fmt.Errorf("%w: publisher: Config.Dialect is nil", oncebox.ErrInvalidConfig))
	}
	if c.WakeQueueLimit > 1 {
		errs = append(errs, fmt.Errorf("%w: publisher: Config.WakeQueueLimit is %v: must be at most 1 (a share of the notification queue), or negative to never read the usage",
			oncebox.ErrInvalidConfig, c.WakeQueueLimit))
	}
	if c.WakeQueueCheck < 0 {
		errs = append(errs, fmt.Errorf("%w: publisher: Config.WakeQueueCheck is %v: must not be negative (zero: %v)",
			oncebox.ErrInvalidConfig, c.WakeQueueCheck, DefaultWakeQueueCheck))
	}
	if c.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: publisher: Config.MaxDelay is %v: must not be negative (zero: %v)",
			oncebox.ErrInvalidConfig, c.MaxDelay, DefaultMaxDelay))
	}
	if err := c.Oncebox.WithDefaults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("publisher: Config.Oncebox: %w", err))
	}
	return errors.Join(errs...)
}

// NewPublisher returns a Publisher writing through db, which must be the
// caller's open transaction: sql.TxFromPgx(tx), sql.TxFromStdSQL(tx) or any
// sql.ContextExecutor with Commit and Rollback methods. A pool or a *sql.DB is
// refused with oncebox.ErrNoTransaction unless
// Config.AllowNonTransactionalDangerously is set.
func NewPublisher(db sql.ContextExecutor, config Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: publisher: db is nil", oncebox.ErrNoTransaction)
	}
	if config.Dialect == nil {
		return nil, fmt.Errorf("%w: publisher: Config.Dialect is nil", oncebox.ErrInvalidConfig)
	}
	if !isTx(db) && !config.AllowNonTransactionalDangerously {
		return nil, fmt.Errorf("%w (got %T; set Config.AllowNonTransactionalDangerously to write outside one)",
			oncebox.ErrNoTransaction, db)
	}
	config = config.withDefaults()
	if config.MaxDelay < 0 { // refused by Validate, which NewPublisher does not run whole
		config.MaxDelay = DefaultMaxDelay
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	maxSize := config.Oncebox.Outbox.MaxPayloadSize
	if maxSize <= 0 {
		maxSize = oncebox.DefaultMaxPayloadSize
	}
	return &Publisher{db: db, w: config.Dialect, config: config, maxSize: maxSize, logger: logger}, nil
}

// isTx tells a transaction from a pool the way watermill-sql does: only a
// transaction can be committed and rolled back.
func isTx(db sql.ContextExecutor) bool {
	_, ok := db.(interface {
		Commit() error
		Rollback() error
	})
	return ok
}

// Publish writes msgs as events of type topic, all in one statement (several
// past the rows one statement of the database takes, still in the caller's
// transaction: dialects.OutboxWriter.InsertEvents). The context of the
// first message is used for the statements.
//
// Each message keeps its UUID, payload and metadata; its ordering key is read
// from the oncebox_key header (see oncebox.SetKey). Each event gets a new
// UUIDv7, written into the message's metadata as oncebox_event_id beside
// oncebox_event_type once the rows are written; headers of those names that a
// message already carries are replaced, because a republished message is a
// new event.
//
// A message that carries Watermill's delay metadata (delay.Message with
// delay.For or delay.Until, or this package's WithDelay and WithDeliverAt)
// is written with next_retry_at at the requested time, and the relay sends
// it then, not before; a time in the past means now. The metadata is kept
// and reaches the broker, as watermill-sql's delayed publisher keeps it
// (docs/delay.md).
//
// Bad input (no messages, a nil message, an empty or oversized topic, an
// unknown event type, a payload and metadata over outbox.max-payload-size
// together, metadata that cannot be
// stored, the reserved metadata key oncebox.HeaderMessageUUID, delay
// metadata that does not parse, a delay over Config.MaxDelay) returns an
// error naming it and the message, and nothing of the call is written.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return oncebox.ErrClosed
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%w: publish to %q: no messages", oncebox.ErrInvalidInput, topic)
	}
	destination, err := p.destination(topic)
	if err != nil {
		return err
	}
	now := p.config.Clock.Now().UTC()
	rows := make([]dialects.EventRow, len(msgs))
	ids := make([]string, len(msgs))
	for i, msg := range msgs {
		if err := p.validateMessage(topic, i, msg); err != nil {
			return err
		}
		id, err := oncebox.NewEventID()
		if err != nil {
			return err
		}
		if err := metadata.Validate(msg.Metadata); err != nil {
			return fmt.Errorf("%w: publish to %q: message %d (uuid %q): %v", oncebox.ErrInvalidInput, topic, i, msg.UUID, err)
		}
		if _, ok := msg.Metadata[oncebox.HeaderMessageUUID]; ok {
			return fmt.Errorf("%w: publish to %q: message %d (uuid %q): metadata key %q is reserved for the message UUID, which the relay writes itself",
				oncebox.ErrInvalidInput, topic, i, msg.UUID, oncebox.HeaderMessageUUID)
		}
		if err := p.checkSize(msg); err != nil {
			return fmt.Errorf("%w: publish to %q: message %d (uuid %q): %v", oncebox.ErrInvalidInput, topic, i, msg.UUID, err)
		}
		due, dueMD, err := dueAt(msg, now, p.config.MaxDelay)
		if err != nil {
			return errDelay(topic, i, msg, err)
		}
		ids[i] = id.String()
		// The metadata leaves out the event id and type (the row's columns;
		// the relay adds them back): a message that carries them, one a
		// handler consumed and republishes, has them dropped here and
		// replaced by its new event's.
		rows[i] = dialects.EventRow{
			ID:          id,
			EventType:   topic,
			Topic:       destination,
			Key:         oncebox.Key(msg),
			MessageUUID: msg.UUID,
			Payload:     msg.Payload,
			Metadata:    metadata.EncodeWithout(msg.Metadata, metadata.InColumns, p.traceHeaders(msg, dueMD...)...),
			CreatedAt:   now,
			NextRetryAt: due,
		}
	}

	ctx := msgs[0].Context()
	if !p.config.DisableWakeOnCommit && !p.w.CanNotify() {
		// No NOTIFY on this database: a connection opened through
		// inprocess wakes this process's relay once the transaction
		// commits (a no-op on any other connection).
		ctx = inprocess.OnCommit(ctx, dialects.NotifyChannel(p.config.Dialect.Tables()), topic)
	}
	if err := p.insert(ctx, topic, rows); err != nil {
		return err
	}
	if err := p.notify(ctx, topic); err != nil {
		return err
	}
	for i, msg := range msgs {
		if msg.Metadata == nil {
			msg.Metadata = message.Metadata{}
		}
		msg.Metadata.Set(oncebox.HeaderEventID, ids[i])
		msg.Metadata.Set(oncebox.HeaderEventType, topic)
	}
	p.logger.Trace("Events written to the outbox", watermill.LogFields{"event_type": topic, "count": len(msgs)})
	return nil
}

// traceHeaders returns extra followed by the trace context of msg's context
// as header name/value pairs, when that context carries a valid span and msg
// has no traceparent of its own. The message itself is not changed.
func (p *Publisher) traceHeaders(msg *message.Message, extra ...string) []string {
	ctx := msg.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() || msg.Metadata.Get(traceparentHeader) != "" {
		return extra
	}
	prop := p.config.Propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	carrier := propagation.MapCarrier{}
	prop.Inject(ctx, carrier)
	if metadata.Validate(carrier) != nil {
		return extra // a propagator wrote headers that cannot be stored
	}
	for k, v := range carrier {
		if _, set := msg.Metadata[k]; set {
			continue // never overwrite a header the user set
		}
		extra = append(extra, k, v)
	}
	return extra
}

// traceparentHeader is the W3C Trace Context header; a message carrying it
// keeps it.
const traceparentHeader = "traceparent"

func (p *Publisher) insert(ctx context.Context, topic string, rows []dialects.EventRow) error {
	if err := p.w.InsertEvents(ctx, p.db, rows); err != nil {
		var short *dialects.InsertCountError
		if errors.As(err, &short) {
			return fmt.Errorf("oncebox: publish events of type %q: %w", topic, err)
		}
		return fmt.Errorf("oncebox: publish %d events of type %q: %w", len(rows), topic, err)
	}
	return nil
}

// destination validates the event type and returns its destination topic.
func (p *Publisher) destination(eventType string) (string, error) {
	if err := validateName(eventType); err != nil {
		return "", fmt.Errorf("%w: event type (topic) %q: %v", oncebox.ErrInvalidInput, eventType, err)
	}
	ob := p.config.Oncebox.Outbox
	settings, ok := ob.Events[eventType]
	if !ok && ob.StrictEventTypes {
		return "", fmt.Errorf("%w: %q: outbox.strict-event-types allows only %v; no poller would pick it up",
			oncebox.ErrUnknownEventType, eventType, p.config.Oncebox.EventTypes())
	}
	for _, t := range []string{settings.Topic, ob.Defaults.Topic} {
		if t != "" {
			return t, nil
		}
	}
	return eventType, nil
}

func validateName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > oncebox.MaxEventTypeLength:
		return fmt.Errorf("is %d bytes long, more than %d", len(s), oncebox.MaxEventTypeLength)
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	case strings.ContainsRune(s, 0):
		return errors.New("contains a NUL character")
	}
	return nil
}

func (p *Publisher) validateMessage(topic string, i int, msg *message.Message) error {
	if msg == nil {
		return fmt.Errorf("%w: publish to %q: message %d is nil", oncebox.ErrInvalidInput, topic, i)
	}
	if err := validateName(msg.UUID); err != nil {
		return fmt.Errorf("%w: publish to %q: message %d: uuid %q %v", oncebox.ErrInvalidInput, topic, i, msg.UUID, err)
	}
	if k := oncebox.Key(msg); k != "" {
		if err := validateName(k); err != nil {
			return fmt.Errorf("%w: publish to %q: message %d (uuid %q): ordering key %v", oncebox.ErrInvalidInput, topic, i, msg.UUID, err)
		}
	}
	return nil
}

// checkSize holds msg to outbox.max-payload-size, counting the payload and
// the bytes of every metadata key and value: the broker receives the
// metadata as headers of the same record and counts them against its own
// limit (Kafka's message.max.bytes), so a payload under the limit with
// megabytes of metadata would be written here and refused at every relay
// attempt. The headers oncebox adds (event id and type, trace context, about
// 100 bytes) are not counted, so that a limit set to the broker's leaves
// that much room. It runs after the other checks, whose errors say more.
func (p *Publisher) checkSize(msg *message.Message) error {
	md := 0
	for k, v := range msg.Metadata {
		md += len(k) + len(v)
	}
	if total := len(msg.Payload) + md; total > p.maxSize {
		return fmt.Errorf("payload is %d bytes and metadata %d (keys and values), %d in all, more than outbox.max-payload-size %d, which counts both",
			len(msg.Payload), md, total, p.maxSize)
	}
	return nil
}

// Close makes later Publish calls fail with oncebox.ErrClosed. It does not
// touch the transaction, which belongs to the caller.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
