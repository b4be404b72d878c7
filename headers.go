package oncebox

import "github.com/ThreeDotsLabs/watermill/message"

// Metadata keys that oncebox sets on every event. They travel with the message
// to the broker (as Kafka headers or AMQP headers) so that consumers written in
// any language can read them.
const (
	// HeaderEventID carries the event's time-ordered id (UUIDv7, canonical
	// text form). It is the consumer's deduplication key.
	HeaderEventID = "oncebox_event_id"
	// HeaderEventType carries the event type the event was published under.
	HeaderEventType = "oncebox_event_type"
	// HeaderKey carries the optional ordering (partition) key. The relay sends
	// it as the Kafka message key.
	HeaderKey = "oncebox_key"
)

// SetKey sets the ordering key of msg: events with the same key go to the same
// Kafka partition. An empty key removes it.
func SetKey(msg *message.Message, key string) {
	if key == "" {
		delete(msg.Metadata, HeaderKey)
		return
	}
	if msg.Metadata == nil {
		msg.Metadata = message.Metadata{}
	}
	msg.Metadata.Set(HeaderKey, key)
}

// Key returns the ordering key of msg, or "" when it has none.
func Key(msg *message.Message) string {
	return msg.Metadata.Get(HeaderKey)
}

// EventIDOf returns the event id carried by msg in [HeaderEventID].
func EventIDOf(msg *message.Message) (EventID, error) {
	return ParseEventID(msg.Metadata.Get(HeaderEventID))
}
