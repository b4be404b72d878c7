package metrics_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/publisher"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// publish commits n events of eventType created at the clock's time.
func publish(t *testing.T, s *pgtest.Schema, clock clockwork.Clock, eventType string, n int) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	pub, err := publisher.NewPublisher(wsql.TxFromPgx(tx), publisher.Config{Dialect: s.Dialect, Clock: clock}, nil)
	require.NoError(t, err)
	msgs := make([]*message.Message, n)
	for i := range msgs {
		msgs[i] = message.NewMessage(watermill.NewUUID(), []byte(`{"n":1}`))
	}
	require.NoError(t, pub.Publish(eventType, msgs...))
	require.NoError(t, tx.Commit(ctx))
	ids := make([]string, n)
	for i, m := range msgs {
		ids[i] = m.Metadata.Get(oncebox.HeaderEventID)
	}
	return ids
}

// recorder is a message.Publisher that fails the topics in reject and
// counts the rest.
type recorder struct {
	mu     sync.Mutex
	sent   int
	reject map[string]bool
}

func (r *recorder) Publish(topic string, msgs ...*message.Message) error {
	if r.reject[topic] {
		return errors.New("rejected by the broker: record too large")
	}
	r.mu.Lock()
	r.sent += len(msgs)
	r.mu.Unlock()
	return nil
}

func (r *recorder) Close() error { return nil }

// value returns the value of the series name{labels} in reg, and whether it
// exists.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !matches(m.GetLabel(), labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// matches reports whether a series' label pairs are exactly labels. It is
// generic so that the tests need not import client_model.
func matches[P interface {
	GetName() string
	GetValue() string
}](pairs []P, labels map[string]string) bool {
	got := map[string]string{}
	for _, lp := range pairs {
		got[lp.GetName()] = lp.GetValue()
	}
	if len(got) != len(labels) {
		return false
	}
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return true
}

// mustValue is value that requires the series to exist.
func mustValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := value(t, reg, name, labels)
	require.True(t, ok, "series %s%v exists", name, labels)
	return v
}
