// Package watermillsuite runs Watermill's universal Pub/Sub test suite
// (github.com/ThreeDotsLabs/watermill/pubsub/tests, TestPubSub) on the whole
// oncebox path: a message.Publisher that writes each Publish call to the
// outbox in its own PostgreSQL transaction, the relay (poller) sending every
// discovered event type to the topic of the same name, and the broker's own
// Watermill subscriber (watermill-kafka on an in-process kfake cluster,
// watermill-amqp on the machine's RabbitMQ).
//
// The package holds tests only; docs/design.md ("Watermill's universal
// suite") says which of the suite's tests run and why the others are
// disabled.
package watermillsuite
