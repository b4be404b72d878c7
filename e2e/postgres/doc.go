// Package postgres runs oncebox end to end against PostgreSQL set up
// the way production runs it (issue 28, docs/postgresql.md): clusters of our
// own with autovacuum on (internal/pgcluster), a PgBouncer in transaction
// pooling in front, a synchronous streaming replica promoted mid-run. Each
// test publishes events through the outbox, relays them to an in-memory
// broker (Watermill's gochannel) and consumes them through the inbox, then
// checks that every committed event was handled exactly once.
//
// It holds tests only: go test ./e2e/postgres (make test runs it; it needs
// root, postgresql-common and pgbouncer, see docs/postgresql.md).
package postgres
