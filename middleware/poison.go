package middleware

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/metadata"
)

// PoisonConfig configures a PoisonQueue.
type PoisonConfig struct {
	// DB is where the DLQ rows are written, in their own statement (the
	// handler's transaction, if any, has rolled back). Required.
	DB wsql.ContextExecutor
	// Dialect builds the SQL. Required.
	Dialect dialects.Dialect
	// Key returns the message's event id. Default: the oncebox_event_id
	// header. A key that is not a UUID is stored as no event id; such rows
	// are unique by message UUID instead.
	Key KeyFunc
	// ShouldPoison decides which handler errors park the message. Default:
	// every error.
	ShouldPoison func(err error) bool
	// Clock stamps the failure. Default: the real clock.
	Clock clockwork.Clock
	// OnParked, if set, is called after a message was stored in the DLQ,
	// with the handler's name and the handler's error. It is called
	// synchronously on the handler's goroutine: return quickly.
	OnParked func(handler string, err error)
	// OnStoreFailed, if set, is called when a message could not be stored
	// in the DLQ (it is nacked and redelivered), with the handler's name
	// and the store's error. Called synchronously: return quickly.
	OnStoreFailed func(handler string, err error)
}

// PoisonQueue stores messages whose handler failed in the DLQ table (source
// consumer) and acks them, so that one bad message stops blocking the
// subscription. An operator retries, resolves or deletes them later.
type PoisonQueue struct {
	config PoisonConfig
	logger watermill.LoggerAdapter
}

// NewPoisonQueue validates config and returns a PoisonQueue.
func NewPoisonQueue(config PoisonConfig, logger watermill.LoggerAdapter) (*PoisonQueue, error) {
	var errs []error
	if config.DB == nil {
		errs = append(errs, errors.New("PoisonConfig.DB is nil"))
	}
	if config.Dialect == nil {
		errs = append(errs, errors.New("PoisonConfig.Dialect is nil"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: poison queue: %w", oncebox.ErrInvalidConfig, err)
	}
	if config.Key == nil {
		config.Key = KeyFromMetadata(oncebox.HeaderEventID)
	}
	if config.ShouldPoison == nil {
		config.ShouldPoison = func(error) bool { return true }
	}
	if config.Clock == nil {
		config.Clock = clockwork.NewRealClock()
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &PoisonQueue{config: config, logger: logger.With(watermill.LogFields{"component": "oncebox-poison-queue"})}, nil
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
		produced, err := h(msg)
		if err == nil || !p.config.ShouldPoison(err) {
			return produced, err
		}
		handler := message.HandlerNameFromCtx(msg.Context())
		fields := watermill.LogFields{
			"message_uuid": msg.UUID,
			"handler":      handler,
			"topic":        message.SubscribeTopicFromCtx(msg.Context()),
			"event_id":     msg.Metadata.Get(oncebox.HeaderEventID),
			"event_type":   msg.Metadata.Get(oncebox.HeaderEventType),
		}
		if storeErr := p.store(msg, err); storeErr != nil {
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

func (p *PoisonQueue) store(msg *message.Message, handlerErr error) error {
	id, err := oncebox.NewEventID()
	if err != nil {
		return err
	}
	ctx := msg.Context()
	topic := message.SubscribeTopicFromCtx(ctx)
	row := dialects.DLQRow{
		ID:          id,
		HandlerName: clip(message.HandlerNameFromCtx(ctx), MaxKeyLength),
		EventType:   clip(firstNonEmpty(msg.Metadata.Get(oncebox.HeaderEventType), topic, "unknown"), MaxKeyLength),
		Topic:       clip(firstNonEmpty(topic, "unknown"), MaxKeyLength),
		Key:         clip(sanitize(oncebox.Key(msg)), MaxKeyLength),
		MessageUUID: clip(firstNonEmpty(sanitize(msg.UUID), "unknown"), MaxKeyLength),
		Payload:     msg.Payload,
		Metadata:    metadata.Encode(sanitizeMetadata(msg.Metadata)),
		Error:       clip(sanitize(handlerErr.Error()), 4000),
		FailedAt:    p.config.Clock.Now().UTC(),
	}
	if eventID, err := oncebox.ParseEventID(p.config.Key(msg)); err == nil {
		row.EventID = &eventID
	}
	q := p.config.Dialect.DLQUpsertConsumer(row)
	if _, err := p.config.DB.ExecContext(ctx, q.SQL, q.Args...); err != nil {
		return fmt.Errorf("oncebox: poison queue: store message %s: %w", msg.UUID, err)
	}
	return nil
}

// sanitize makes s storable as text: valid UTF-8 without NUL. A poison
// message is stored whatever it carries; nothing it holds may make the store
// fail.
func sanitize(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func sanitizeMetadata(md message.Metadata) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		if k = sanitize(k); k != "" {
			out[k] = sanitize(v)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8ValidTail(s) {
		s = s[:len(s)-1]
	}
	return s
}

// utf8ValidTail reports whether cutting s did not split a rune.
func utf8ValidTail(s string) bool { return strings.ToValidUTF8(s, "") == s }

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
