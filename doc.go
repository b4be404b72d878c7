// Package oncebox is a transactional outbox and inbox for Watermill.
//
// A service writes its business rows and its events in one database
// transaction with the [publisher] package; a relay (package poller) delivers
// the committed events to a broker later, at least once, from any number of
// instances without a coordinator; the consuming service drops duplicates with
// an inbox table (package middleware).
//
// This root package holds what every other package shares: the configuration
// types and their YAML/JSON loading, the metadata header names, the event id
// type, the sentinel errors and [Migrate], which creates the tables.
//
// # Guarantees
//
// The publisher never begins, commits or rolls back a transaction: the event
// rows commit or roll back with the caller's business rows. See README.md and
// docs/design.md for the full table of guarantees and the state machine.
package oncebox
