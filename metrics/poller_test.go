package metrics_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/poller"
)

func TestPollerHooksAcrossARealRun(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(t0)
	publish(t, s, clock, "order-created", 3)
	publish(t, s, clock, "order-rejected", 1)

	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	rec := &recorder{reject: map[string]bool{"order-rejected": true}}
	cfg := poller.Config{Dialect: s.Dialect, EventTypes: []string{"order-created", "order-rejected"}, Clock: clock, Hooks: h}
	zero := 0
	cfg.Oncebox.Outbox.Defaults.MaxRetries = &zero
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	p, err := poller.New(s.Beginner, rec, cfg, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-p.Running()
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.NoError(t, <-errc)
	})

	et := func(e string) map[string]string { return map[string]string{"event_type": e} }
	job := func(j string) map[string]string { return map[string]string{"oncebox_job": j} }
	done := func() bool {
		v, _ := value(t, reg, "oncebox_job_rows_total", job(poller.JobDLQTransfer))
		sent, _ := value(t, reg, "oncebox_outbox_events_sent_total", et("order-created"))
		return v == 1 && sent == 3
	}
	// Waiting on the clock: two poll loops, recovery, clean-up, DLQ
	// transfer, DLQ retry, DLQ clean-up.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for spent := time.Duration(0); ; spent += 250 * time.Millisecond {
		require.NoError(t, clock.BlockUntilContext(ctx, 7))
		if done() {
			break
		}
		require.Less(t, spent, 10*time.Minute, "DLQ transfer not seen in the metrics")
		clock.Advance(250 * time.Millisecond)
	}
	require.Equal(t, 1, s.Count(t, s.Dialect.Tables().DLQ, ""))

	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_outbox_events_sent_total", et("order-created")))
	// The series of a polled event type exist at 0 before their first event.
	require.Zero(t, mustValue(t, reg, "oncebox_outbox_events_sent_total", et("order-rejected")), "nothing of order-rejected was sent")
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events_failed_total",
		map[string]string{"event_type": "order-rejected", "final": "true"}))
	require.Zero(t, mustValue(t, reg, "oncebox_outbox_events_failed_total", map[string]string{"event_type": "order-rejected", "final": "false"}),
		"max-retries 0: the first failure is final")
	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_outbox_claimed_events_total", et("order-created")))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_claimed_events_total", et("order-rejected")))
	require.GreaterOrEqual(t, mustValue(t, reg, "oncebox_outbox_polls_total", et("order-created")), 1.0)
	require.Greater(t, mustValue(t, reg, "oncebox_outbox_poll_delay_seconds", et("order-created")), 0.0)
	require.Zero(t, mustValue(t, reg, "oncebox_outbox_broker_unavailable_total", et("order-created")))
	require.Zero(t, mustValue(t, reg, "oncebox_outbox_broker_outage", et("order-created")))

	require.GreaterOrEqual(t, mustValue(t, reg, "oncebox_job_runs_total",
		map[string]string{"oncebox_job": poller.JobDLQTransfer, "result": metrics.ResultSucceeded}), 1.0)
	require.GreaterOrEqual(t, mustValue(t, reg, "oncebox_job_run_duration_seconds", job(poller.JobDLQTransfer)), 1.0)
	require.Greater(t, mustValue(t, reg, "oncebox_job_delay_seconds", job(poller.JobDLQTransfer)), 0.0)
	require.Zero(t, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": poller.JobDLQTransfer, "result": metrics.ResultFailed}),
		"a job's series exist at 0 from its first run")
}

func TestPollerHooksDirectCalls(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	h.BrokerUnavailable("a", 5, context.DeadlineExceeded)
	h.StaleFinalize("a", 4, 1)
	h.SendFailed("a", []poller.Failure{{Final: false}, {Final: false}, {Final: true}})
	h.PollDone(poller.PollInfo{EventType: "a", Err: context.Canceled, NextDelay: 2 * time.Second})
	h.JobDone(poller.JobInfo{Job: poller.JobRecovery, Skipped: true})
	h.JobDone(poller.JobInfo{Job: poller.JobRecovery, Err: context.Canceled, Rows: 0})
	h.NotifyQueueUsage(0.25)
	a := map[string]string{"event_type": "a"}
	require.Equal(t, 0.25, mustValue(t, reg, metrics.NameNotifyQueueUsage, nil))
	require.Equal(t, 5.0, mustValue(t, reg, "oncebox_outbox_broker_unavailable_total", a))
	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_outbox_stale_finalizes_total", a))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_outbox_events_failed_total", map[string]string{"event_type": "a", "final": "false"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_events_failed_total", map[string]string{"event_type": "a", "final": "true"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_outbox_poll_errors_total", a))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_outbox_poll_delay_seconds", a))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": poller.JobRecovery, "result": "skipped"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": poller.JobRecovery, "result": "failed"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_job_run_duration_seconds", map[string]string{"oncebox_job": poller.JobRecovery}),
		"a skipped run is not timed")

	// A second registration on the same registry fails; inbox hooks share
	// the job metrics.
	_, err = metrics.NewPollerHooks(reg)
	require.Error(t, err)
	_, err = metrics.NewInboxHooks(reg)
	require.NoError(t, err)
}

// The relay's clock offset (poller.Hooks.ClockOffset) is a gauge in
// seconds, the last reading.
func TestPollerHooksClockOffset(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	require.Zero(t, mustValue(t, reg, metrics.NameRelayClockOffset, nil), "0 until measured")
	h.ClockOffset(30 * time.Second)
	h.ClockOffset(-1500 * time.Millisecond)
	require.Equal(t, -1.5, mustValue(t, reg, metrics.NameRelayClockOffset, nil))
}

// The wake-up listener's state (poller.WakeHooks): up while it listens, a
// deaf session (a transaction pooler) and a lost one counted apart, and
// each notification by what it woke. No series before the first call: a
// relay without a listener (MySQL, SQLite) exports none.
func TestPollerHooksListener(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		require.NotEqual(t, metrics.NameRelayListenerUp, mf.GetName(), "no listener yet: no series")
	}

	h.ListenerUp()
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayListenerUp, nil))
	h.Woken("order.created", poller.WokeLoop)
	h.Woken("order.created", poller.WokeLoop)
	h.Woken("other", poller.WokeDiscovery)
	h.Woken(dialects.DLQRetryWakePayload, poller.WokeDLQRetry)
	h.Woken("strict", poller.WokeNothing)
	require.Equal(t, 2.0, mustValue(t, reg, metrics.NameRelayWakeUps, map[string]string{"target": "loop"}))
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayWakeUps, map[string]string{"target": "discovery"}))
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayWakeUps, map[string]string{"target": "dlq_retry"}))
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayWakeUps, map[string]string{"target": "nothing"}))

	h.ListenerDown(fmt.Errorf("session: %w", poller.ErrListenerDeaf))
	require.Equal(t, 0.0, mustValue(t, reg, metrics.NameRelayListenerUp, nil))
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayListenerDown, map[string]string{"reason": metrics.ListenerDeaf}))
	require.Equal(t, 0.0, mustValue(t, reg, metrics.NameRelayListenerDown, map[string]string{"reason": metrics.ListenerLost}))
	h.ListenerUp()
	h.ListenerDown(io.ErrUnexpectedEOF)
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameRelayListenerDown, map[string]string{"reason": metrics.ListenerLost}))
	require.Equal(t, 0.0, mustValue(t, reg, metrics.NameRelayListenerUp, nil))
}

// The partition maintenance's figures: partitions created and removed
// count up, the expired partitions kept at the last run are a gauge.
func TestPollerHooksPartitions(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	h.PartitionsMaintained(dialects.PartitionStats{Created: 4, Kept: 3}, nil)
	h.PartitionsMaintained(dialects.PartitionStats{Created: 1, Removed: 2, Kept: 1}, nil)
	require.Equal(t, 5.0, mustValue(t, reg, metrics.NameOutboxPartitions, map[string]string{"action": "created"}))
	require.Equal(t, 2.0, mustValue(t, reg, metrics.NameOutboxPartitions, map[string]string{"action": "removed"}))
	require.Equal(t, 1.0, mustValue(t, reg, metrics.NameOutboxPartitionsKept, nil))
}
