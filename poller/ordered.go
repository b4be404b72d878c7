package poller

import "github.com/ThreeDotsLabs/watermill/message"

// KeyOrderKeeper is an optional extension of BatchPublisher for
// publishers that deliver the messages of one call that carry the same key
// in the order given, and never confirm a message of a key after one of
// the same key and call that failed: Kafka with an idempotent producer
// and one request in flight (per partition, a failed batch fails the
// messages after it). For an ordered type (ordering: key) the poller then
// claims a batch that may carry several events of a key, in order; for
// any other publisher a batch carries at most one event of a key, so a
// key's events go one batch at a time and a failed one is never overtaken
// (docs/ordering.md). It counts only on a BatchPublisher: a plain
// publisher's failed call is sent again one message per call, and a key's
// later message could then be confirmed after an earlier one was refused.
type KeyOrderKeeper interface {
	// KeepsKeyOrder reports whether the publisher, as configured, keeps
	// the order of a key's messages within one call.
	KeepsKeyOrder() bool
}

// perKey is how many events of one key a claim of limit events may take
// when pub sends them.
func perKey(pub message.Publisher, limit int) int {
	_, batch := pub.(BatchPublisher)
	if k, ok := pub.(KeyOrderKeeper); ok && batch && k.KeepsKeyOrder() {
		return limit
	}
	return 1
}
