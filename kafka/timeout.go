package kafka

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/oncebox/watermill-oncebox/poller"
)

var _ poller.SendTimeouter = (*Publisher)(nil)

// SendTimeout implements poller.SendTimeouter: how long one PublishBatch
// can wait for the cluster with the publisher's Sarama configuration (see
// sendTimeout). The relay refuses to start when it is not below
// outbox.max-batch-processing-time.
func (p *Publisher) SendTimeout() time.Duration { return p.sendTimeout }

// sendTimeout estimates the longest a SendMessages call waits for answers:
// a metadata refresh (Metadata.Timeout), then each of the 1 + Retry.Max
// attempts waiting Net.ReadTimeout for the produce response plus the
// retry backoff. Sarama has no overall deadline, so this is an estimate
// from its timeouts, not a bound it enforces; with
// RecommendedSaramaConfig it is 10s + 6 × 30s = 190s.
func sendTimeout(c *sarama.Config) time.Duration {
	attempts := time.Duration(1 + max(c.Producer.Retry.Max, 0))
	return c.Metadata.Timeout + attempts*(c.Net.ReadTimeout+c.Producer.Retry.Backoff)
}

// connectTimeout is how long a call waits for the producer to be created
// before it fails as unavailable (the creation goes on for the next call):
// Metadata.Timeout, or Net.DialTimeout + Net.ReadTimeout when that is 0
// (unbounded). SendTimeout does not add it, so that configurations tuned to
// a short max-batch-processing-time keep working: the send estimate already
// counts one Metadata.Timeout for the topic's metadata, which a freshly
// created client has just fetched (Metadata.Full, Sarama's default and
// RecommendedSaramaConfig's), so the first send does not spend it again.
func connectTimeout(c *sarama.Config) time.Duration {
	if c.Metadata.Timeout > 0 {
		return c.Metadata.Timeout
	}
	return c.Net.DialTimeout + c.Net.ReadTimeout
}
