// Package tracee2e holds the tests that need the OpenTelemetry SDK: one trace from
// the request that wrote an event, through the relay, to the consumer's
// inbox and handler (see docs/tracing.md), and the relay span's links and
// counts under a refused send. It has no code of its own; it is a module of
// its own so that the core module does not require the SDK.
package tracee2e
