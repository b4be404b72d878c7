package kafka

import (
	"bytes"
	"fmt"

	"github.com/IBM/sarama"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox"
)

// KeyMarshaler returns a marshaler for watermill-kafka's publisher
// (kafkawm.PublisherConfig.Marshaler) that writes the records this
// package's Publisher writes: the oncebox_key metadata entry as the record
// key, so that one key's events go to one partition in order; every
// metadata entry as a header; the UUID in _watermill_message_uuid; a nil
// payload as an empty value, not a null one (a tombstone on a compacted
// topic). A message without oncebox_key gets no key (null), so Sarama's
// hash partitioner spreads such messages over the partitions.
//
// watermill-kafka's DefaultMarshaler sets no key at all, so a relay that
// passes watermill-kafka's publisher to poller.New loses every key without
// it. NewWithPartitioningMarshaler(func … { return oncebox.Key(msg), nil })
// keeps the keys but gives the messages without one an empty, non-null key,
// which sends all of them to a single partition. Unmarshal is
// DefaultMarshaler's, so the marshaler works on a subscriber too.
func KeyMarshaler() kafkawm.MarshalerUnmarshaler { return keyMarshaler{} }

type keyMarshaler struct {
	kafkawm.DefaultMarshaler
}

// Marshal builds the record of msg, as Publisher does.
func (keyMarshaler) Marshal(topic string, msg *message.Message) (*sarama.ProducerMessage, error) {
	return marshal(topic, msg)
}

// Probe values for CheckWatermillPublisherConfig; nothing is sent.
const (
	probeTopic = "oncebox-config-check"
	probeKey   = "oncebox-config-check-key"
)

// CheckWatermillPublisherConfig returns a human-readable warning for each
// setting of a watermill-kafka publisher configuration that loses what the
// relay relies on when that publisher is passed to poller.New: a
// marshaler that drops the oncebox_key metadata instead of making it the
// record key (watermill-kafka's DefaultMarshaler, the default, does), that
// gives unkeyed messages a non-null key, or that drops the
// oncebox_event_id header; and the producer settings CheckProducerConfig
// warns about (watermill-kafka's DefaultSaramaSyncPublisherConfig, used
// when OverwriteSaramaConfig is nil, has acks=1 and no idempotence). It
// returns nothing for a configuration with KeyMarshaler() and
// RecommendedSaramaConfig().
//
// The relay cannot see inside watermill-kafka's publisher, so call this on
// the configuration you build it from and log the warnings at start.
// The marshaler is checked by marshalling two probe messages (nothing is
// sent).
func CheckWatermillPublisherConfig(cfg kafkawm.PublisherConfig) []string {
	var w []string
	if len(cfg.Brokers) == 0 {
		w = append(w, "Brokers is empty: watermill-kafka refuses the configuration")
	}
	if cfg.Marshaler == nil {
		w = append(w, "Marshaler is nil: watermill-kafka's DefaultMarshaler applies, which sets no record key, so oncebox_key is lost and one key's events spread over partitions out of order; set Marshaler: kafka.KeyMarshaler()")
	} else {
		w = append(w, checkMarshaler(cfg.Marshaler)...)
	}
	sc := cfg.OverwriteSaramaConfig
	if sc == nil {
		sc = kafkawm.DefaultSaramaSyncPublisherConfig()
		w = append(w, "OverwriteSaramaConfig is nil: watermill-kafka's DefaultSaramaSyncPublisherConfig applies (acks=1, no idempotence); set OverwriteSaramaConfig: kafka.RecommendedSaramaConfig()")
	}
	for _, pw := range CheckProducerConfig(sc) {
		w = append(w, "OverwriteSaramaConfig: "+pw)
	}
	return w
}

// checkMarshaler marshals a keyed and an unkeyed probe message with m.
func checkMarshaler(m kafkawm.Marshaler) []string {
	keyed := message.NewMessage("oncebox-config-check-1", []byte("{}"))
	keyed.Metadata.Set(oncebox.HeaderEventID, "oncebox-config-check-id")
	oncebox.SetKey(keyed, probeKey)
	rec, err := tryMarshal(m, keyed)
	if err != nil {
		return []string{fmt.Sprintf("Marshaler failed on a message with oncebox_key: %v", err)}
	}
	var w []string
	if key := encoded(rec.Key); key == nil || !bytes.Equal(key, []byte(probeKey)) {
		w = append(w, fmt.Sprintf("Marshaler %T does not make oncebox_key the record key (got %q): every event loses its key, and one key's events spread over partitions out of order; set Marshaler: kafka.KeyMarshaler()", m, key))
	}
	if !hasHeader(rec, oncebox.HeaderEventID, "oncebox-config-check-id") {
		w = append(w, fmt.Sprintf("Marshaler %T does not write metadata oncebox_event_id as a header: every consumer's inbox refuses the events; set Marshaler: kafka.KeyMarshaler()", m))
	}
	unkeyed := message.NewMessage("oncebox-config-check-2", []byte("{}"))
	if rec, err := tryMarshal(m, unkeyed); err == nil && rec.Key != nil {
		w = append(w, fmt.Sprintf("Marshaler %T gives a message without oncebox_key a non-null key (%q): the hash partitioner sends all of them to one partition; set Marshaler: kafka.KeyMarshaler()", m, encoded(rec.Key)))
	}
	return w
}

// tryMarshal runs a user's marshaler, turning a panic into an error.
func tryMarshal(m kafkawm.Marshaler, msg *message.Message) (rec *sarama.ProducerMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("panicked: %v", r)
		}
	}()
	rec, err = m.Marshal(probeTopic, msg)
	if err == nil && rec == nil {
		err = fmt.Errorf("returned no record")
	}
	return rec, err
}

// encoded returns the bytes of e, or nil when there are none.
func encoded(e sarama.Encoder) []byte {
	if e == nil {
		return nil
	}
	b, err := e.Encode()
	if err != nil {
		return nil
	}
	return b
}

func hasHeader(rec *sarama.ProducerMessage, key, value string) bool {
	for _, h := range rec.Headers {
		if string(h.Key) == key && string(h.Value) == value {
			return true
		}
	}
	return false
}
