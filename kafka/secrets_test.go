package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/kafka"
)

// TestSASLPasswordNeverShows: neither an invalid configuration, nor an
// unreachable broker (met by the first call: NewPublisher does not dial),
// nor the start-up warnings put the SASL password in an error or a log
// line.
func TestSASLPasswordNeverShows(t *testing.T) {
	t.Parallel()
	const password = "Sx9Kd3LmPw"
	withSASL := func(mutate func(c *sarama.Config)) *sarama.Config {
		c := kafka.RecommendedSaramaConfig()
		c.Net.SASL.Enable = true
		c.Net.SASL.User = "relay"
		c.Net.SASL.Password = password
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		c.Metadata.Retry.Max = 0
		mutate(c)
		return c
	}
	cases := map[string]*sarama.Config{
		"unreachable broker":  withSASL(func(*sarama.Config) {}),
		"unknown mechanism":   withSASL(func(c *sarama.Config) { c.Net.SASL.Mechanism = "NOPE" }),
		"weak config":         withSASL(func(c *sarama.Config) { c.Producer.Idempotent = false; c.Producer.RequiredAcks = sarama.WaitForLocal }),
		"no user":             withSASL(func(c *sarama.Config) { c.Net.SASL.User = "" }),
		"invalid and no acks": withSASL(func(c *sarama.Config) { c.Producer.Return.Successes = false }),
	}
	for name, cfg := range cases {
		logger := watermill.NewCaptureLogger()
		p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: []string{"127.0.0.1:1"}, SaramaConfig: cfg}, logger)
		if err == nil { // valid: the dial happens on the first call
			perr := p.ProbeBroker(context.Background())
			require.ErrorIs(t, perr, oncebox.ErrBrokerUnavailable, name)
			_, err = p.PublishBatch("orders", message.NewMessage("1", nil))
			require.ErrorIs(t, err, oncebox.ErrBrokerUnavailable, name)
			require.NoError(t, p.Close())
			err = errors.Join(perr, err)
		} else {
			require.ErrorIs(t, err, oncebox.ErrInvalidConfig, name)
			require.Nil(t, p, name)
		}
		text := fmt.Sprintf("%v %+v %#v %v", err, err, logger.Captured(), kafka.CheckProducerConfig(cfg))
		require.NotContains(t, text, password, name)
	}
}
