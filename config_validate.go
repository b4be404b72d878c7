package oncebox

import (
	"errors"
	"time"
)

// The Validate methods of the parts of Config, for code that builds one
// part alone. Each checks its part as Config.Validate would (zero fields
// taking their defaults) and names the fields by their YAML path.

// Validate checks the outbox block as Config.Validate does: the defaults
// block, every event type, the DLQ, the clean-up and the limits.
func (o OutboxConfig) Validate() error { return Config{Outbox: o}.WithDefaults().Validate() }

// Validate checks the inbox block as Config.Validate does: the source type,
// the clean-up, the cache and the relation of their ttls.
func (i InboxConfig) Validate() error { return Config{Inbox: i}.WithDefaults().Validate() }

// Validate checks the DLQ block (outbox.dlq) as Config.Validate does.
func (d DLQConfig) Validate() error {
	return Config{Outbox: OutboxConfig{DLQ: d}}.WithDefaults().Validate()
}

// Validate checks the cache block (inbox.cache) alone: the cache name when
// the cache is enabled, and the ttl. Its relation to inbox.clean-up.ttl is
// checked by InboxConfig.Validate and Config.Validate, which know both.
func (c CacheConfig) Validate() error {
	return Config{Inbox: InboxConfig{Cache: c, CleanUp: CleanUpConfig{TTL: maxDuration}}}.WithDefaults().Validate()
}

// Validate checks a clean-up block (outbox.clean-up, outbox.dlq.clean-up,
// inbox.clean-up), named "clean-up" in the error: a zero field takes its
// default, a negative ttl or a batch size out of range is refused.
func (c CleanUpConfig) Validate() error {
	return c.withDefaults(time.Hour).validate("clean-up")
}

// Validate checks outbox.sender.type: "kafka", "rabbitmq" or empty.
func (s SenderConfig) Validate() error { return validateBrokerType("outbox.sender.type", s.Type) }

// Validate checks inbox.source.type: "kafka", "rabbitmq" or empty.
func (s SourceConfig) Validate() error { return validateBrokerType("inbox.source.type", s.Type) }

// Validate checks a resolved event type, as Config.Event returns it: the
// type's name, then its settings as outbox.events.<type>.
func (e EventConfig) Validate() error {
	path := eventPath(e.EventType)
	errs := []error{validateEventType(path, e.EventType)}
	s := EventSettings{Topic: e.Topic, BatchSize: e.BatchSize, Polling: e.Polling, MaxRetries: Int(e.MaxRetries),
		Backoff: BackoffSettings{Enabled: Bool(e.Backoff.Enabled), Delay: e.Backoff.Delay, Multiplier: e.Backoff.Multiplier}}
	errs = append(errs, s.validate(path, true), validateBackoff(path+".backoff", e.Backoff, e.MaxRetries))
	return errors.Join(errs...)
}
