// Package middleware holds the consuming side's Watermill router middleware:
// the inbox, which drops the duplicates that at-least-once delivery brings,
// and the poison queue, which parks failed messages in the DLQ table so that
// one bad message stops blocking a subscription.
//
// # Order with Watermill's Retry
//
// Middleware added first is outermost. Add the poison queue first, then
// Retry, then the inbox:
//
//	router.AddMiddleware(
//		poison.Middleware,                  // sees only what Retry gave up on
//		middleware.Retry{MaxRetries: 3}.Middleware,
//		inbox.Middleware,                   // each retry is a fresh transaction
//	)
//
// With the poison queue inside Retry, every failed attempt would be stored
// and acked at once and Retry would never retry (watermill issues 580 and
// 645 are this mistake). With the inbox outside Retry, the retries would run
// in one transaction that the first failure already spoiled.
package middleware
