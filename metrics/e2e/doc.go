// Package e2e holds the end-to-end test of package metrics over the real
// PostgreSQL and an in-process Kafka (kfake). It is a module of its own so
// that the metrics module requires no Kafka module: a RabbitMQ-only or
// core-only service that imports metrics gets neither watermill-kafka,
// Sarama, franz-go nor kfake in its module graph (docs/modules.md,
// scripts/check-modules.sh).
package e2e
