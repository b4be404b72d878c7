// Package rabbitmq is the RabbitMQ side of oncebox: a publisher for the relay
// that knows which messages the broker really took, and the subscriber
// configuration the inbox needs.
//
// [Publisher] is a message.Publisher built directly on amqp091-go that also
// implements poller.BatchPublisher. It publishes a whole batch with the
// mandatory flag over up to PublisherConfig.ChannelsPerCall channels in
// confirm mode in parallel, each ordering key's messages on one channel in
// batch order, then waits for every confirm (bounded by
// PublisherConfig.ConfirmTimeout). A message the broker returns
// as unroutable, or nacks, is that message's failure, so the relay retries it
// and finally moves it to the DLQ table instead of losing it. Errors meaning
// the broker cannot be reached wrap oncebox.ErrBrokerUnavailable, so the
// relay releases the batch without counting an attempt; the next call
// reconnects.
//
// Consumers use watermill-amqp v3's subscriber with
// [RecommendedSubscriberConfig]; [CheckSubscriberConfig] lists what in a
// configuration would lose or skip events behind the inbox's back.
//
// See docs/rabbitmq.md for the header mapping, the error classification and
// the reasons behind each choice.
package rabbitmq
