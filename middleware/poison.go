package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/oncebox/watermill-oncebox/internal/clock"
	"github.com/oncebox/watermill-oncebox/internal/dbtext"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// PoisonConfig configures a PoisonQueue. The database is NewPoisonQueue's
// argument.
type PoisonConfig struct {
	// Dialect stores the rows (its Inbox role). Required.
	Dialect dialects.Dialect
	// Key returns the message's event id. Default: the oncebox_event_id
	// header. A key that is not a UUID is stored as no event id; such rows
	// are unique by message UUID instead.
	Key KeyFunc
	// ShouldPoison decides which handler errors park the message; the others
	// are returned, so the message is nacked and redelivered. Default: every
	// error except those registry.IsTransient recognises as "try later" (the
	// handler's database or broker unreachable or restarting, a deadlock or
	// lock timeout, a deadline, a shutdown). Such an error that never goes
	// away makes the message come back forever: each is reported to
	// OnNacked (metrics.NewPoisonHooks counts them) and logged by the router.
	ShouldPoison func(err error) bool
	// Clock stamps the failure. Nil means the real clock; tests pass a fake
	// one (see oncebox.Clock).
	Clock oncebox.Clock
	// OnParked, if set, is called after a message was stored in the DLQ,
	// with the handler's name and the handler's error. It is called
	// synchronously on the handler's goroutine: return quickly.
	OnParked func(handler string, err error)
	// OnNacked, if set, is called when a handler error is returned instead
	// of parked because ShouldPoison said so, with the handler's name and
	// the error. Called synchronously: return quickly.
	OnNacked func(handler string, err error)
	// OnStoreFailed, if set, is called when a message could not be stored
	// in the DLQ (it is nacked and redelivered), with the handler's name
	// and the store's error. Called synchronously: return quickly.
	OnStoreFailed func(handler string, err error)
}

// PoisonQueue stores messages whose handler failed in the DLQ table (source
// consumer) and acks them, so that one bad message stops blocking the
// subscription. An operator retries, resolves or deletes them later.
type PoisonQueue struct {
	db     wsql.ContextExecutor // where the DLQ rows are written
	config PoisonConfig
	d      dialects.Inbox // config.Dialect's role
	logger watermill.LoggerAdapter
}

// withDefaults returns c with its zero fields set to their defaults.
func (c PoisonConfig) withDefaults() PoisonConfig {
	if c.Key == nil {
		c.Key = KeyFromMetadata(oncebox.HeaderEventID)
	}
	if c.ShouldPoison == nil {
		c.ShouldPoison = func(err error) bool { return !registry.IsTransient(err) }
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}

// Validate checks c as NewPoisonQueue does, zero fields taking their
// defaults; the error names every field at fault and wraps
// oncebox.ErrInvalidConfig.
func (c PoisonConfig) Validate() error {
	if err := errors.Join(c.problems()...); err != nil {
		return fmt.Errorf("%w: poison queue: %w", oncebox.ErrInvalidConfig, err)
	}
	return nil
}

// problems lists what is wrong with c, one error per field.
func (c PoisonConfig) problems() []error {
	var errs []error
	if c.Dialect == nil {
		errs = append(errs, errors.New("PoisonConfig.Dialect is nil"))
	}
	return errs
}

// NewPoisonQueue returns a PoisonQueue that writes the DLQ rows through db,
// each in its own statement (the handler's transaction, if any, has rolled
// back). config is completed with its defaults and validated; the error
// names every argument and field at fault and wraps
// oncebox.ErrInvalidConfig.
func NewPoisonQueue(db wsql.ContextExecutor, config PoisonConfig, logger watermill.LoggerAdapter) (*PoisonQueue, error) {
	var errs []error
	if db == nil {
		errs = append(errs, errors.New("db is nil"))
	}
	config = config.withDefaults()
	if err := errors.Join(append(errs, config.problems()...)...); err != nil {
		return nil, fmt.Errorf("%w: poison queue: %w", oncebox.ErrInvalidConfig, err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &PoisonQueue{db: db, config: config, d: config.Dialect, logger: logger.With(watermill.LogFields{"component": "oncebox-poison-queue"})}, nil
}

// Middleware is the router middleware. On a handler error it stores the
// message and acks it; if the store fails, the handler's error is returned
// with the store's, the message is nacked and comes back. Storing is an
// upsert on (event id, handler): a crash between storing and acking, or a
// redelivery, adds an attempt to the same row instead of a second row.
// Both outcomes are logged at ERROR with the message's event id, event type
// and handler, and reported to OnParked or OnStoreFailed when set.
func (p *PoisonQueue) Middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		attempts := new(atomic.Int64)
		msg.SetContext(context.WithValue(msg.Context(), attemptsKey{}, attempts))
		produced, err := h(msg)
		if err == nil {
			return produced, nil
		}
		handler := message.HandlerNameFromCtx(msg.Context())
		if !p.config.ShouldPoison(err) {
			if p.config.OnNacked != nil {
				p.config.OnNacked(handler, err)
			}
			return produced, err
		}
		fields := watermill.LogFields{
			"message_uuid": msg.UUID,
			"handler":      handler,
			"topic":        message.SubscribeTopicFromCtx(msg.Context()),
			"event_id":     msg.Metadata.Get(oncebox.HeaderEventID),
			"event_type":   msg.Metadata.Get(oncebox.HeaderEventType),
		}
		if storeErr := p.store(msg, err, int(attempts.Load())); storeErr != nil {
			p.logger.Error("Could not store a poison message in the DLQ; it will be redelivered", storeErr,
				fields.Add(watermill.LogFields{"handler_error": err.Error()}))
			if p.config.OnStoreFailed != nil {
				p.config.OnStoreFailed(handler, storeErr)
			}
			return nil, errors.Join(err, storeErr)
		}
		p.logger.Error("Message parked in the DLQ", err, fields)
		if p.config.OnParked != nil {
			p.config.OnParked(handler, err)
		}
		return nil, nil
	}
}

// attemptsKey is the context key of the counter of a delivery's handler
// attempts, which Middleware puts in the message's context and
// CountAttempts increments.
type attemptsKey struct{}

// CountAttempts is the handler middleware that counts the handler's
// attempts for the PoisonQueue around it, so that a parked row's
// retry_count (the CLI's RETRIES) is the number of times the handler ran:
// 4 after Watermill's Retry with 3 retries gave up, not 1. Add it inside
// Retry, right around what each attempt runs (poison queue → Retry →
// CountAttempts → inbox → handler); Consumer does. Without it each
// delivery counts one attempt. Watermill's Retry hands every attempt the
// same *message.Message, whose context carries the counter.
func (p *PoisonQueue) CountAttempts(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		if c, ok := msg.Context().Value(attemptsKey{}).(*atomic.Int64); ok {
			c.Add(1)
		}
		return h(msg)
	}
}

// plainError is stored in place of a handler's error that the database
// refused (see store).
const plainError = "oncebox: the handler's error (%d bytes) could not be stored; see the consumer's log for message %s"

func (p *PoisonQueue) store(msg *message.Message, handlerErr error, attempts int) error {
	id, err := oncebox.NewEventID()
	if err != nil {
		return err
	}
	ctx := msg.Context()
	topic := message.SubscribeTopicFromCtx(ctx)
	row := dialects.DLQRow{
		ID:          id,
		HandlerName: dbtext.Text(message.HandlerNameFromCtx(ctx), MaxKeyLength),
		EventType:   dbtext.Text(firstNonEmpty(msg.Metadata.Get(oncebox.HeaderEventType), topic, "unknown"), MaxKeyLength),
		Topic:       dbtext.Text(firstNonEmpty(topic, "unknown"), MaxKeyLength),
		Key:         dbtext.Text(oncebox.Key(msg), MaxKeyLength),
		MessageUUID: firstNonEmpty(dbtext.Text(msg.UUID, MaxKeyLength), "unknown"),
		Payload:     msg.Payload,
		Metadata:    metadata.Encode(dbtext.Map(msg.Metadata)),
		Error:       dbtext.Error(handlerErr),
		FailedAt:    p.config.Clock.Now().UTC(),
		Attempts:    attempts,
	}
	if eventID, err := oncebox.ParseEventID(p.config.Key(msg)); err == nil {
		row.EventID = &eventID
		row.ID = eventRowID(row.HandlerName, row.MessageUUID, eventID)
		if err := p.keepApart(ctx, &row); err != nil {
			return err
		}
	}
	if row.EventID == nil {
		if err := p.keepApartByMessage(ctx, &row); err != nil {
			return err
		}
	}
	err = p.exec(ctx, row)
	if err == nil {
		return nil
	}
	// The database refused the row. Whatever in the handler's error it could
	// not take (a trigger, a column rule nobody foresaw) must not make the
	// message come back forever: store it once more with a plain error text.
	// If that fails too, the database itself is the problem: the message is
	// nacked and redelivered, and the failure is logged and reported.
	row.Error = fmt.Sprintf(plainError, len(row.Error), row.MessageUUID)
	if err2 := p.exec(ctx, row); err2 != nil {
		return errors.Join(err, err2)
	}
	p.logger.Error("The handler's error could not be stored; the message was parked with a plain text", err,
		watermill.LogFields{"message_uuid": msg.UUID, "handler": row.HandlerName})
	if p.config.OnStoreFailed != nil {
		p.config.OnStoreFailed(row.HandlerName, err)
	}
	return nil
}

// keepApart decides where a message with an event id is stored. The row of
// the same event id and handler normally holds the same message (a
// redelivery, or a crash between storing and acking), which counts one more
// attempt on it. A different payload under the same id is another message
// (a producer that reused an id, or a forged one): merging it would keep its
// payload nowhere, so it is stored apart, keyed by its message UUID like a
// message without an event id, and the collision is logged.
func (p *PoisonQueue) keepApart(ctx context.Context, row *dialects.DLQRow) error {
	stored, found, err := p.d.PoisonPayload(ctx, p.db, *row.EventID, row.HandlerName)
	if err != nil {
		return fmt.Errorf("oncebox: poison queue: store message %s: read the DLQ row of event %s: %w", row.MessageUUID, row.EventID, err)
	}
	if !found {
		return nil
	}
	if !bytes.Equal(stored, row.Payload) {
		p.logger.Error("Another message carries the event id of a parked one; it is parked apart, by message UUID",
			fmt.Errorf("event id %s: payload differs from the parked message's", row.EventID),
			watermill.LogFields{"event_id": row.EventID.String(), "message_uuid": row.MessageUUID, "handler": row.HandlerName})
		row.EventID = nil
	}
	return nil
}

// keepApartByMessage decides where a message without an event id is
// stored: its row is keyed by (message UUID, handler), and its id derived
// from them (messageRowID), so that the row a redelivery would count one
// more attempt on can be read by id. A different payload under the same
// message UUID (a producer that reused one, or two long UUIDs that share
// their first 255 bytes, which is all the column keeps) is another message:
// it is stored apart, under the message UUID followed by its payload's
// digest, and the collision is logged. A row parked before this version
// has a random id and is not found: the message is counted on it, as
// before.
func (p *PoisonQueue) keepApartByMessage(ctx context.Context, row *dialects.DLQRow) error {
	row.ID = messageRowID(row.HandlerName, row.MessageUUID)
	stored, found, err := p.config.Dialect.DLQGet(ctx, p.db, row.ID)
	if err != nil {
		return fmt.Errorf("oncebox: poison queue: store message %s: read its DLQ row %s: %w", row.MessageUUID, row.ID, err)
	}
	if !found || bytes.Equal(stored.Payload, row.Payload) {
		return nil
	}
	if stored.EventID != nil || stored.Source != string(oncebox.DLQSourceConsumer) || stored.MessageUUID != row.MessageUUID {
		// Not the row of this message (the ids of two of them met, which
		// 122 bits of digest make all but impossible): a fresh id, and the
		// upsert finds the message's row by its key as before.
		id, err := oncebox.NewEventID()
		if err != nil {
			return err
		}
		row.ID = id
		return nil
	}
	parked := row.MessageUUID
	sum := sha256.Sum256(row.Payload)
	suffix := " payload-sha256:" + hex.EncodeToString(sum[:8])
	row.MessageUUID = dbtext.Text(row.MessageUUID, MaxKeyLength-len(suffix)) + suffix
	row.ID = messageRowID(row.HandlerName, row.MessageUUID)
	p.logger.Error("Another message without an event id carries the message UUID of a parked one; it is parked apart, "+
		"under its message UUID and payload digest",
		fmt.Errorf("message UUID %s: payload differs from the parked message's", parked),
		watermill.LogFields{"message_uuid": parked, "stored_as": row.MessageUUID, "handler": row.HandlerName})
	return nil
}

// eventRowID is the id of the DLQ row of an event parked by handler: the
// same every time that event fails that handler, so that an event retried
// (the dlq-retry job deletes its row and sends it again under its event
// id) and parked again keeps its DLQ id, which an operator may have noted
// (before, each parking drew a new UUIDv7). A UUIDv8 of the SHA-256 digest
// of (handler, event id), as messageRowID; the (event id, source,
// handler) unique key allows one such row at a time, so the id is never
// wanted by two rows. An event whose id is the id of the row of a message
// parked without one (the retry sent it with that id: messageRowID) keeps
// that id. A row parked before this version keeps its random id while it
// exists (the upsert counts attempts on it); once retried, it comes back
// under this id.
func eventRowID(handler, messageUUID string, eventID oncebox.EventID) oncebox.EventID {
	if eventID == messageRowID(handler, messageUUID) {
		return eventID
	}
	sum := sha256.Sum256([]byte("oncebox dlq consumer event row\x00" + handler + "\x00" + eventID.String()))
	var id oncebox.EventID
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80 // version 8 (RFC 9562: custom)
	id[8] = id[8]&0x3f | 0x80 // variant 10
	return id
}

// messageRowID is the id of the DLQ row of a message without an event id,
// parked by handler under messageUUID: a UUIDv8 made of their SHA-256
// digest, so that a redelivery finds the row it would be counted on. It
// becomes the event id of the message if an operator retries it (as the
// random id of a row did before).
func messageRowID(handler, messageUUID string) oncebox.EventID {
	sum := sha256.Sum256([]byte("oncebox dlq consumer row\x00" + handler + "\x00" + messageUUID))
	var id oncebox.EventID
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80 // version 8 (RFC 9562: custom)
	id[8] = id[8]&0x3f | 0x80 // variant 10
	return id
}

func (p *PoisonQueue) exec(ctx context.Context, row dialects.DLQRow) error {
	if err := p.d.PoisonUpsert(ctx, p.db, row); err != nil {
		return fmt.Errorf("oncebox: poison queue: store message %s: %w", row.MessageUUID, err)
	}
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
