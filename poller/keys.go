package poller

import (
	"reflect"

	"github.com/ThreeDotsLabs/watermill"
)

// watermillKafkaPublisher is the type of watermill-kafka's publisher, and
// keyMarshalerPkg the package of the marshaler that keeps the ordering key
// (kafka.KeyMarshaler in this module). The relay looks at them by name: the
// core does not import Sarama or watermill-kafka.
const (
	watermillKafkaPkg = "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	keyMarshalerPkg   = "github.com/oncebox/watermill-oncebox/kafka"
)

// keysDropped reports whether pub is watermill-kafka's publisher with a
// marshaler other than kafka.KeyMarshaler: its default marshaler sends no
// record key, and its partitioning marshaler gives an unkeyed message an
// empty one, so the events' ordering key (oncebox_key) would not reach the
// record key. It reads the publisher's configuration by reflection, without
// calling anything.
func keysDropped(pub any) bool {
	v := reflect.ValueOf(pub)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct || v.Type().Name() != "Publisher" || v.Type().PkgPath() != watermillKafkaPkg {
		return false
	}
	m := v.FieldByName("config").FieldByName("Marshaler")
	if !m.IsValid() || m.Kind() != reflect.Interface || m.IsNil() {
		return true
	}
	t := m.Elem().Type()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() != keyMarshalerPkg
}

// warnIfKeysDropped logs, once at start, that the ordering keys of the
// events will not reach Kafka through pub.
func warnIfKeysDropped(pub any, logger watermill.LoggerAdapter) {
	if keysDropped(pub) {
		logger.Info("WARNING: publisherOut is watermill-kafka's publisher without kafka.KeyMarshaler(): "+
			"the events' ordering keys (oncebox.SetKey) will not be Kafka record keys; set "+
			"PublisherConfig.Marshaler to kafka.KeyMarshaler() (see kafka.CheckWatermillPublisherConfig)", nil)
	}
}
