// Package tracee2e holds the end-to-end tracing test: one trace from
// the request that wrote an event, through the relay, to the consumer's
// inbox and handler (see docs/tracing.md). It has no code of its own.
package tracee2e
