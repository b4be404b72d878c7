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
	// HeaderMessageUUID is the header the relay writes the Watermill message
	// UUID under: watermill-kafka's UUIDHeaderKey and watermill-amqp's
	// DefaultMessageUUIDHeaderKey, whose subscribers turn it back into the
	// UUID. It is reserved: the publisher refuses a message carrying it as
	// metadata, which the Kafka relay could never send.
	HeaderMessageUUID = "_watermill_message_uuid"
)

// The other headers above are not reserved, on purpose: a message that
// carries HeaderEventID or HeaderEventType (one a handler consumed and
// republishes) has them replaced by the publisher, because it becomes a new
// event; HeaderKey is the user's, set with SetKey; and a traceparent the
// message carries is kept in place of the one of its context.

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
