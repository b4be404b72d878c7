package publisher

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/ThreeDotsLabs/watermill/message"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// DefaultMaxDelay is the default of Config.MaxDelay: 30 days.
const DefaultMaxDelay = 30 * 24 * time.Hour

// WithDelay delays the event by d: it is written with next_retry_at d after
// the publisher's clock reads at Publish, and the relay sends it then, not
// before (docs/delay.md). It sets Watermill's delay metadata
// (_watermill_delayed_for; the publisher adds _watermill_delayed_until), the
// same that delay.Message(msg, delay.For(d)) sets, so a message delayed
// either way is stored alike. d ≤ 0 means now.
func WithDelay(d time.Duration) MessageOption {
	return func(m *message.Message) {
		m.Metadata.Set(delay.DelayedForKey, d.String())
		delete(m.Metadata, delay.DelayedUntilKey) // the publisher's clock decides
	}
}

// WithDeliverAt delays the event until t: it is written with next_retry_at
// t and the relay sends it then, not before (docs/delay.md). It sets
// Watermill's delay metadata as delay.Message(msg, delay.Until(t)) does,
// _watermill_delayed_until with nanoseconds (Watermill's own writes whole
// seconds). A time in the past means now.
func WithDeliverAt(t time.Time) MessageOption {
	return func(m *message.Message) {
		m.Metadata.Set(delay.DelayedUntilKey, t.UTC().Format(time.RFC3339Nano))
		m.Metadata.Set(delay.DelayedForKey, time.Until(t).String())
	}
}

// dueAt reads msg's delay metadata (Watermill's components/delay keys) and
// returns when the event is due, never before now, and the metadata pairs to
// store over the message's own: _watermill_delayed_until, when msg gave only
// _watermill_delayed_for, so that the stored event carries both as
// delay.Message writes them. _watermill_delayed_until, when set, decides (as
// in watermill-sql's delayed subscribers); otherwise
// _watermill_delayed_for is added to now. A due time more than maxDelay
// after now, or a value that does not parse, is an error naming the key
// and its value.
func dueAt(msg *message.Message, now time.Time, maxDelay time.Duration) (time.Time, []string, error) {
	untilS, forS := msg.Metadata.Get(delay.DelayedUntilKey), msg.Metadata.Get(delay.DelayedForKey)
	if untilS == "" && forS == "" {
		return now, nil, nil
	}
	var extra []string
	var d time.Duration
	if forS != "" {
		var err error
		if d, err = time.ParseDuration(forS); err != nil {
			return time.Time{}, nil, fmt.Errorf("metadata %s %q is not a duration such as \"90s\" (as delay.For writes it): %v",
				delay.DelayedForKey, forS, err)
		}
	}
	at := now.Add(d)
	if untilS != "" {
		t, err := time.Parse(time.RFC3339Nano, untilS)
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("metadata %s %q is not an RFC 3339 time such as \"2026-12-05T12:00:00Z\" (as delay.Until writes it): %v",
				delay.DelayedUntilKey, untilS, err)
		}
		at = t.UTC()
	} else {
		extra = []string{delay.DelayedUntilKey, at.Format(time.RFC3339Nano)}
	}
	if !at.After(now) {
		return now, extra, nil
	}
	if wait := at.Sub(now); wait > maxDelay {
		return time.Time{}, nil, fmt.Errorf("delayed until %s, %s from now, more than the maximum delay %s (publisher.Config.MaxDelay)",
			at.Format(time.RFC3339Nano), wait.Round(time.Second), maxDelay)
	}
	return at, extra, nil
}

// errDelay wraps a delay error of message i of a publish to topic.
func errDelay(topic string, i int, msg *message.Message, err error) error {
	return fmt.Errorf("%w: publish to %q: message %d (uuid %q): %v; nothing was written", oncebox.ErrInvalidInput, topic, i, msg.UUID, err)
}
