package kafka

import (
	"errors"
	"reflect"
	"strings"

	"github.com/IBM/sarama"
	kafkawm "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/oncebox/watermill-oncebox/poller"
)

// The relay's default classification (poller.IsUnavailable) and its
// checks at start know Sarama and watermill-kafka through this module: a
// program that imports it, even with a blank import, relays with
// watermill-kafka's own publisher as with this package's Publisher (an
// outage counts no attempt; a publisher that drops the ordering keys is
// reported once at start).
func init() {
	poller.RegisterUnavailable(isSaramaOutage)
	poller.RegisterPublisherCheck(keysDroppedWarning)
}

// isSaramaOutage recognises one error of a chain (poller.IsUnavailable
// walks the chain): one of unavailableErrors (a KError by its code, a
// sentinel by its value), a sentinel of the Sarama that watermill-kafka v2
// used (github.com/Shopify/sarama) by its type or text, and watermill-kafka
// v3's publisher after Close.
func isSaramaOutage(e error) bool {
	if k, ok := e.(sarama.KError); ok {
		return saramaUnavailableCodes[int64(k)]
	}
	for _, u := range unavailableErrors {
		if errors.Is(e, u) {
			return true
		}
	}
	return isShopifyKError(e) || hasKnownText(e)
}

// saramaUnavailableCodes are the codes of the KErrors of unavailableErrors:
// LEADER_NOT_AVAILABLE (5), NOT_LEADER_OR_FOLLOWER (6), REQUEST_TIMED_OUT
// (7), BROKER_NOT_AVAILABLE (8), REPLICA_NOT_AVAILABLE (9),
// NETWORK_EXCEPTION (13), NOT_ENOUGH_REPLICAS (19),
// NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), NOT_CONTROLLER (41),
// KAFKA_STORAGE_ERROR (56).
var saramaUnavailableCodes = func() map[int64]bool {
	codes := map[int64]bool{}
	for _, e := range unavailableErrors {
		var k sarama.KError
		if errors.As(e, &k) {
			codes[int64(k)] = true
		}
	}
	return codes
}()

// isShopifyKError recognises the KError of github.com/Shopify/sarama, the
// former path of Sarama, which this module does not import, by its type.
func isShopifyKError(e error) bool {
	t := reflect.TypeOf(e)
	if t.Name() != "KError" || t.PkgPath() != "github.com/Shopify/sarama" || t.Kind() != reflect.Int16 {
		return false
	}
	return saramaUnavailableCodes[reflect.ValueOf(e).Int()]
}

// knownTexts are outage errors known by their text: Sarama's sentinels
// (the same texts under github.com/Shopify/sarama, whose values this
// module does not import), sony/gobreaker's open breaker (the text of
// go-resiliency's, which Sarama uses) and watermill-kafka v3's publisher
// after Close, an errors.New value created in its Publish. An error of the
// chain matches when its text is one of these or starts with one followed
// by ": " (Sarama wraps the broker errors behind its sentinel that way).
var knownTexts = []string{
	"publisher closed", // watermill-kafka v3's Publish after Close
}

func init() {
	for _, e := range unavailableErrors {
		var k sarama.KError
		if !errors.As(e, &k) {
			knownTexts = append(knownTexts, e.Error())
		}
	}
}

func hasKnownText(e error) bool {
	msg := e.Error()
	for _, text := range knownTexts {
		if msg == text || (strings.HasPrefix(msg, text) && strings.HasPrefix(msg[len(text):], ": ")) {
			return true
		}
	}
	return false
}

// keysDroppedWarning is the relay's check of its publisherOut: it warns
// when pub is watermill-kafka's publisher with a marshaler other than
// KeyMarshaler. Its default marshaler sends no record key, and its
// partitioning marshaler gives an unkeyed message an empty one, so the
// events' ordering key (oncebox_key) would not reach the record key.
func keysDroppedWarning(pub message.Publisher) string {
	p, ok := pub.(*kafkawm.Publisher)
	if !ok || p == nil || !keysDropped(p) {
		return ""
	}
	return "publisherOut is watermill-kafka's publisher without kafka.KeyMarshaler(): " +
		"the events' ordering keys (oncebox.SetKey) will not be Kafka record keys; set " +
		"PublisherConfig.Marshaler to kafka.KeyMarshaler() (see kafka.CheckWatermillPublisherConfig)"
}

// keysDropped reads the marshaler of p's configuration, a field
// watermill-kafka does not export, by reflection, without calling anything.
func keysDropped(p *kafkawm.Publisher) bool {
	m := reflect.ValueOf(p).Elem().FieldByName("config").FieldByName("Marshaler")
	if !m.IsValid() || m.Kind() != reflect.Interface || m.IsNil() {
		return true
	}
	t := m.Elem().Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != reflect.TypeFor[keyMarshaler]()
}
