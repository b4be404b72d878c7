package middleware

import (
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmw "github.com/ThreeDotsLabs/watermill/message/router/middleware"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// ConsumerConfig configures a Consumer: the three middlewares of the
// consuming side and the retry policy between them.
type ConsumerConfig struct {
	// PoisonQueue parks what the retries gave up on. Required.
	PoisonQueue *PoisonQueue
	// Inbox runs each attempt in its own transaction and drops duplicates.
	// Required.
	Inbox *Inbox
	// Retry is the policy of the retries of a failed handler (YAML
	// inbox.retry). Zero fields take their defaults (3 retries, 100ms
	// doubling up to 10s).
	Retry oncebox.RetryConfig
}

// Consumer is the consuming side's middleware: the poison queue, Watermill's
// Retry and the inbox, in the only order that neither loses a message nor
// commits an effect twice. Build it with NewConsumer and add its Middleware
// to a router (or one handler) instead of the three.
type Consumer struct {
	poison *PoisonQueue
	retry  wmw.Retry
	inbox  *Inbox
}

// NewConsumer validates config and returns a Consumer.
func NewConsumer(config ConsumerConfig, logger watermill.LoggerAdapter) (*Consumer, error) {
	var errs []error
	if config.PoisonQueue == nil {
		errs = append(errs, errors.New("ConsumerConfig.PoisonQueue is nil"))
	}
	if config.Inbox == nil {
		errs = append(errs, errors.New("ConsumerConfig.Inbox is nil"))
	}
	// The retry policy is the inbox.retry section of the configuration:
	// validate it as such, so the error names the key.
	full := oncebox.Config{Inbox: oncebox.InboxConfig{Retry: config.Retry}}.WithDefaults()
	if err := full.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: consumer: %w", oncebox.ErrInvalidConfig, err)
	}
	return &Consumer{poison: config.PoisonQueue, inbox: config.Inbox, retry: RetryPolicy(full.Inbox.Retry, logger)}, nil
}

// RetryPolicy returns Watermill's Retry middleware with the policy r (its
// zero fields taking their defaults): r.MaxRetries retries, waiting
// r.InitialInterval × r.Multiplier^n up to r.MaxInterval. MaxInterval is
// always set: without it Watermill's backoff keeps every wait at
// InitialInterval, whatever Multiplier says.
func RetryPolicy(r oncebox.RetryConfig, logger watermill.LoggerAdapter) wmw.Retry {
	r = oncebox.Config{Inbox: oncebox.InboxConfig{Retry: r}}.WithDefaults().Inbox.Retry
	return wmw.Retry{MaxRetries: *r.MaxRetries, InitialInterval: r.InitialInterval, MaxInterval: r.MaxInterval,
		Multiplier: r.Multiplier, Logger: logger}
}

// Middleware is the router middleware: the poison queue outermost, then
// Retry, then the inbox. Each attempt of the handler is its own inbox
// transaction: a failed attempt rolls back its writes with the event id, and
// the next attempt starts afresh; only what Retry gave up on reaches the
// poison queue, which parks it and acks.
//
// The two other orders are bugs. With the poison queue inside Retry, the
// first failure is parked and acked and Retry never retries. With the inbox
// outside Retry, every attempt runs in the one transaction the inbox opened:
// a handler that wrote its effect and then failed is run again in the same
// transaction, which would commit both attempts' writes — a double side
// effect. The inbox finds such a Retry and stops rather than commit
// (ErrRetryInsideInbox, InboxConfig.OnMisuse;
// middleware.TestConsumerCommitsOneEffectWhereTheWrongOrderCommitsNone).
func (c *Consumer) Middleware(h message.HandlerFunc) message.HandlerFunc {
	return c.poison.Middleware(c.retry.Middleware(c.poison.CountAttempts(c.inbox.Middleware(h))))
}
