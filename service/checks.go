package service

import (
	"fmt"
	"reflect"
	"strings"

	oncebox "github.com/oncebox/watermill-oncebox"
)

// startupWarnings are the checks that outbox.sender.type and
// inbox.source.type select, and the warnings of the broker checks the
// caller gave (WithSenderCheck, WithSourceCheck). The broker packages are
// modules of their own, so their checks come in through the options rather
// than being called from here.
func startupWarnings(cfg oncebox.Config, o options) []string {
	var w []string
	for _, c := range o.senderChecks {
		for _, s := range c {
			w = append(w, "outbox.sender: "+s)
		}
	}
	for _, c := range o.sourceChecks {
		for _, s := range c {
			w = append(w, "inbox.source: "+s)
		}
	}
	if t := cfg.Outbox.Sender.Type; t != "" {
		switch {
		case o.relay == nil:
			w = append(w, fmt.Sprintf("outbox.sender.type is %q but this service runs no relay (no WithRelay): another process must relay its outbox", t))
		case !speaks(o.relay, t):
			w = append(w, fmt.Sprintf("outbox.sender.type is %q but the relay publishes with a %T", t, o.relay))
		}
		// The rabbitmq package's publisher checks its configuration when it
		// is built; a Kafka producer's settings are the caller's.
		if check := senderCheck[t]; check != "" && len(o.senderChecks) == 0 && o.relay != nil {
			w = append(w, fmt.Sprintf("outbox.sender.type is %q but no check of the producer was given: pass service.WithSenderCheck(%s)", t, check))
		}
	}
	if t := cfg.Inbox.Source.Type; t != "" {
		if !cfg.Inbox.Enabled {
			w = append(w, fmt.Sprintf("inbox.source.type is %q but inbox.enabled is false: this service consumes nothing through oncebox", t))
		} else if len(o.sourceChecks) == 0 {
			w = append(w, fmt.Sprintf("inbox.source.type is %q but no check of the subscriber was given: pass service.WithSourceCheck(%s)", t, sourceCheck[t]))
		}
	}
	return w
}

var senderCheck = map[string]string{"kafka": "kafka.CheckProducerConfig(saramaConfig)"}

var sourceCheck = map[string]string{
	"kafka":    "kafka.CheckSubscriberConfig(subscriberConfig)",
	"rabbitmq": "rabbitmq.CheckSubscriberConfig(amqpConfig)",
}

// speaks tells whether pub's type comes from a package of the broker
// senderType names: the kafka and rabbitmq packages' publishers, and
// watermill-kafka's and watermill-amqp's.
func speaks(pub any, senderType string) bool {
	t := reflect.TypeOf(pub)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := strings.ToLower(t.PkgPath())
	switch senderType {
	case "kafka":
		return strings.Contains(pkg, "kafka") || strings.Contains(pkg, "sarama")
	case "rabbitmq":
		return strings.Contains(pkg, "rabbitmq") || strings.Contains(pkg, "amqp")
	}
	return true
}
