package oncebox

import "errors"

// Sentinel errors shared by the oncebox packages. Wrapped errors name the input
// at fault; test for these with errors.Is.
var (
	// ErrNoTransaction is returned when a publish is attempted on a database
	// handle that is not an open transaction.
	ErrNoTransaction = errors.New("oncebox: no transaction: the outbox publisher must be built over the caller's open transaction")
	// ErrClosed is returned by a component used after Close.
	ErrClosed = errors.New("oncebox: closed")
	// ErrUnknownEventType is returned when publishing an event type that is not
	// configured while event types are configured: no poller would pick it up.
	ErrUnknownEventType = errors.New("oncebox: unknown event type")
	// ErrInvalidInput is wrapped by every error about a bad argument (nil
	// message, empty topic, oversized payload, metadata that cannot be stored).
	ErrInvalidInput = errors.New("oncebox: invalid input")
	// ErrInvalidConfig is wrapped by every configuration validation error.
	ErrInvalidConfig = errors.New("oncebox: invalid configuration")
)

// ErrBrokerUnavailable marks a publish error as "the broker cannot be
// reached", as opposed to "this message was rejected". The relay does not
// count an attempt for it: the batch is released and the whole event type
// backs off, so an outage does not burn every event's retries. Broker
// publishers wrap their connection errors with it; poller.Config.IsUnavailable
// classifies the errors of other publishers.
var ErrBrokerUnavailable = errors.New("oncebox: broker unavailable")

// ErrMissingEventID is returned by the inbox for a message without a usable
// deduplication key (no oncebox_event_id header, or an empty or oversized
// one). By default such a message is not processed: the error sends it down
// the poison path, so it is neither silently processed twice nor lost.
var ErrMissingEventID = errors.New("oncebox: message has no usable event id")
