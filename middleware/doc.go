// Package middleware holds the consuming side's Watermill router middleware:
// the inbox, which drops the duplicates that at-least-once delivery brings,
// and the poison queue, which parks failed messages in the DLQ table so that
// one bad message stops blocking a subscription.
//
// # One middleware for the consuming side
//
// NewConsumer composes the poison queue, Watermill's Retry (with the
// inbox.retry policy) and the inbox in the only safe order; add it instead
// of the three:
//
//	consumer, err := middleware.NewConsumer(middleware.ConsumerConfig{
//		PoisonQueue: poison, Inbox: inbox, Retry: cfg.Inbox.Retry}, logger)
//	router.AddMiddleware(consumer.Middleware)
//
// service.New builds it from the configuration (Service.Middleware).
//
// The order is the poison queue outermost, then Retry, then the inbox. With
// the poison queue inside Retry, every failed attempt would be parked and
// acked at once and Retry would never retry (watermill issues 580 and 645
// are this mistake). With the inbox outside Retry, every attempt runs in
// the one transaction the inbox opened, so a handler that wrote its effect
// and then failed commits that effect together with the next attempt's: a
// double side effect, not a recoverable error. A Transactional inbox finds
// Retry inside it — right inside when the router builds the handler,
// anywhere else when the handler takes its transaction (TxFromContext reads
// the caller's stack) — rolls the message back, fails it with
// ErrRetryInsideInbox and stops: it holds every later message until the
// router closes, and calls InboxConfig.OnMisuse, which may close the router.
package middleware
