package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/poller"
)

// series returns every series gathered from reg as name{label="value",…}
// with its value (a histogram's by its count).
func series(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"=\""+l.GetValue()+"\"")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// An alert on a series needs the series before the first event: the relay's
// series of an event type exist at 0 from its first poll (they appeared
// with the first outage, send or failure), oncebox_outbox_broker_outage
// among them.
func TestRelaySeriesExistAtZeroFromTheFirstPoll(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	ph, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	ph.PollDone(poller.PollInfo{EventType: "order-created"})
	got := series(t, reg)
	for _, s := range []string{
		`oncebox_outbox_broker_outage{event_type="order-created"}`,
		`oncebox_outbox_events_sent_total{event_type="order-created"}`,
		`oncebox_outbox_events_failed_total{event_type="order-created",final="false"}`,
		`oncebox_outbox_events_failed_total{event_type="order-created",final="true"}`,
		`oncebox_outbox_broker_unavailable_total{event_type="order-created"}`,
		`oncebox_outbox_stale_finalizes_total{event_type="order-created"}`,
		`oncebox_outbox_poll_errors_total{event_type="order-created"}`,
		`oncebox_outbox_claimed_events_total{event_type="order-created"}`,
	} {
		v, ok := got[s]
		require.True(t, ok, "%s exists", s)
		require.Zero(t, v, s)
	}
}

// The poison queue's series of every handler of the service's router exist
// at 0 from Run's start (oncebox_poison_nacked_total appeared with the
// first nack), and the DLQ actions' from registration.
func TestPoisonAndDLQSeriesExistAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	hooks, err := metrics.NewServiceHooks(reg)
	require.NoError(t, err)
	require.NotNil(t, hooks.OnHandlers)
	hooks.OnHandlers([]string{"ship-order"})
	got := series(t, reg)
	for _, s := range []string{
		`oncebox_poison_nacked_total{handler="ship-order"}`,
		`oncebox_poison_parked_total{handler="ship-order"}`,
		`oncebox_poison_store_failures_total{handler="ship-order"}`,
		`oncebox_dlq_actions_total{action="retry"}`,
		`oncebox_dlq_actions_total{action="delete"}`,
	} {
		v, ok := got[s]
		require.True(t, ok, "%s exists", s)
		require.Zero(t, v, s)
	}
}

// The inbox's cache lookups exist at 0 from registration, and a
// namespace's series from its first message: a namespace's first failure
// or duplicate has a series at 0 before it.
func TestInboxSeriesExistAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	ih, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	got := series(t, reg)
	for _, s := range []string{`oncebox_inbox_cache_lookups_total{result="hit"}`, `oncebox_inbox_cache_lookups_total{result="miss"}`} {
		_, ok := got[s]
		require.True(t, ok, "%s exists", s)
	}
	ih.Consumed("billing")
	got = series(t, reg)
	for _, s := range []string{
		`oncebox_inbox_failed_total{inbox_namespace="billing"}`,
		`oncebox_inbox_duplicates_total{inbox_namespace="billing",source="cache"}`,
		`oncebox_inbox_duplicates_total{inbox_namespace="billing",source="table"}`,
	} {
		v, ok := got[s]
		require.True(t, ok, "%s exists", s)
		require.Zero(t, v, s)
	}
}
