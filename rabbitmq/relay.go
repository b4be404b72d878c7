package rabbitmq

import (
	"reflect"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncebox/watermill-oncebox/poller"
)

// The relay's default classification (poller.IsUnavailable) knows
// amqp091-go and watermill-amqp through this module: a program that
// imports it, even with a blank import, relays with watermill-amqp's own
// publisher as with this package's Publisher (an outage counts no attempt).
func init() {
	poller.RegisterUnavailable(isAMQPOutage)
}

// amqpUnavailableCodes are the AMQP reply codes that say the connection or
// channel went away or the broker lacks resources, not that it refused what
// was published: 320 CONNECTION_FORCED (the broker is shutting down or an
// operator closed the connection), 501 FRAME_ERROR (a broken stream), 504
// CHANNEL_ERROR (amqp.ErrClosed: the channel or connection is not open),
// 506 RESOURCE_ERROR.
var amqpUnavailableCodes = map[int]bool{amqp.ConnectionForced: true, amqp.FrameError: true,
	amqp.ChannelError: true, amqp.ResourceError: true}

// isAMQPOutage recognises one error of a chain (poller.IsUnavailable walks
// the chain): an *amqp.Error (or one of github.com/streadway/amqp, the
// client's former path, which this module does not import) that is not a
// soft exception about what was published, with a code of
// amqpUnavailableCodes, and watermill-amqp's "not connected" and closed
// errors.
func isAMQPOutage(e error) bool {
	if ae, ok := e.(*amqp.Error); ok {
		return ae != nil && !isSoftChannelError(ae) && amqpUnavailableCodes[ae.Code]
	}
	return isStreadwayOutage(e) || hasKnownText(e)
}

// isStreadwayOutage recognises an *amqp.Error of github.com/streadway/amqp
// by its type.
func isStreadwayOutage(e error) bool {
	t := reflect.TypeOf(e)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct || t.Elem().Name() != "Error" ||
		t.Elem().PkgPath() != "github.com/streadway/amqp" {
		return false
	}
	v := reflect.ValueOf(e)
	if v.IsNil() {
		return false
	}
	v = v.Elem()
	code, server, recoverable := v.FieldByName("Code"), v.FieldByName("Server"), v.FieldByName("Recover")
	if code.Kind() != reflect.Int || server.Kind() != reflect.Bool || recoverable.Kind() != reflect.Bool {
		return false
	}
	if server.Bool() && recoverable.Bool() {
		return false
	}
	return amqpUnavailableCodes[int(code.Int())]
}

// knownTexts are watermill-amqp v3's outage errors, errors.New values
// created where they are returned, so that only their text identifies
// them: its connection is being re-established, or the publisher or its
// channel pool was closed. An error of the chain matches when its text is
// one of these or starts with one followed by ": ".
var knownTexts = []string{
	"not connected to AMQP",
	"pub/sub is connection closedChan",
	"channel pool is closed",
	"provider is closed",
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
