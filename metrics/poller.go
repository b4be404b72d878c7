package metrics

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Job run results, the values of the label result of oncebox_job_runs_total.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultSkipped   = "skipped"
)

// PollerHooks implements poller.Hooks with Prometheus metrics. Build it with
// NewPollerHooks and set it as poller.Config.Hooks. It is safe for
// concurrent use.
type PollerHooks struct {
	sent        *prometheus.CounterVec
	failed      *prometheus.CounterVec
	unavailable *prometheus.CounterVec
	stale       *prometheus.CounterVec
	polls       *prometheus.CounterVec
	pollErrors  *prometheus.CounterVec
	claimed     *prometheus.CounterVec
	pollDelay   *prometheus.GaugeVec
	outage      *prometheus.GaugeVec
	notifyQueue prometheus.Gauge

	clockOffset  prometheus.Gauge
	listenerUp   *prometheus.GaugeVec   // no labels: absent until the relay has a listener
	listenerDown *prometheus.CounterVec // reason
	wakeUps      *prometheus.CounterVec // target
	partitions   *prometheus.CounterVec // action: created, removed
	partsKept    prometheus.Gauge
	jobs         *jobMetrics
	seen         sync.Map // event type → struct{}: its series exist
}

var (
	_ poller.Hooks     = (*PollerHooks)(nil)
	_ poller.WakeHooks = (*PollerHooks)(nil)

	_ poller.PartitionHooks = (*PollerHooks)(nil)
)

// The values of the label reason of oncebox_relay_listener_down_total.
const (
	// ListenerDeaf: the listener's probe notification never came back
	// (poller.ErrListenerDeaf: a transaction pooler between the relay and
	// PostgreSQL); the relay polls only from then on.
	ListenerDeaf = "deaf"
	// ListenerLost: any other error ended the listener's session; it
	// reconnects after poller.Config.ListenerBackoff.
	ListenerLost = "lost"
)

// jobMetrics are the per-job metrics shared by the poller's jobs and the
// inbox cleaner.
type jobMetrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	rows     *prometheus.CounterVec
	delay    *prometheus.GaugeVec
}

func newJobMetrics() *jobMetrics {
	return &jobMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameJobRuns,
			Help: "Runs of a background job by result: succeeded, failed, or skipped (another instance held the lease)."},
			[]string{"oncebox_job", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameJobRunDuration,
			Help:    "Duration of the runs of a background job that were not skipped.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}},
			[]string{"oncebox_job"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameJobRows,
			Help: "Rows recovered, moved to the DLQ, moved back to the outbox or deleted by a background job."},
			[]string{"oncebox_job"}),
		delay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameJobDelay,
			Help: "Current wait of a background job before its next run."},
			[]string{"oncebox_job"}),
	}
}

// register registers the job metrics with reg, reusing those already there.
func (j *jobMetrics) register(reg prometheus.Registerer) error {
	var errs [4]error
	j.runs, errs[0] = reuse(reg, j.runs)
	j.duration, errs[1] = reuse(reg, j.duration)
	j.rows, errs[2] = reuse(reg, j.rows)
	j.delay, errs[3] = reuse(reg, j.delay)
	return errors.Join(errs[:]...)
}

func (j *jobMetrics) done(job string, skipped bool, rows int, d, next float64, err error) {
	result := ResultSucceeded
	switch {
	case skipped:
		result = ResultSkipped
	case err != nil:
		result = ResultFailed
	}
	for _, r := range []string{ResultSucceeded, ResultFailed, ResultSkipped} {
		j.runs.WithLabelValues(job, r) // every result's series exists, at 0 until it happens
	}
	j.rows.WithLabelValues(job)
	j.runs.WithLabelValues(job, result).Inc()
	if !skipped {
		j.duration.WithLabelValues(job).Observe(d)
	}
	if rows > 0 {
		j.rows.WithLabelValues(job).Add(float64(rows))
	}
	j.delay.WithLabelValues(job).Set(next)
}

// NewPollerHooks creates the poller metrics and registers them with reg.
// It fails when a metric of the same name is already registered there.
func NewPollerHooks(reg prometheus.Registerer) (*PollerHooks, error) {
	et := []string{"event_type"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	h := &PollerHooks{
		sent:        counter(NameOutboxEventsSent, "Events the broker confirmed and that were marked PROCESSED.", et...),
		failed:      counter(NameOutboxEventsFailed, "Failed send attempts; final=\"true\" when the event became FAILED.", "event_type", "final"),
		unavailable: counter(NameOutboxBrokerUnavailable, "Events released without counting an attempt because the broker was unavailable.", et...),
		stale:       counter(NameOutboxStaleFinalizes, "Events a finalize did not match because their claim had been recovered by another instance.", et...),
		polls:       counter(NameOutboxPolls, "Polls of an event type.", et...),
		pollErrors:  counter(NameOutboxPollErrors, "Polls of an event type that ended with a database error.", et...),
		claimed:     counter(NameOutboxClaimedEvents, "Rows claimed by the polls of an event type.", et...),
		pollDelay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameOutboxPollDelay,
			Help: "Current wait before the next poll of an event type."}, et),
		outage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameOutboxBrokerOutage,
			Help: "1 while the broker of an event type is unavailable (its batches are released and it backs off), 0 once it is reached again."}, et),
		notifyQueue: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameNotifyQueueUsage,
			Help: "Usage of PostgreSQL's notification queue (0 to 1) as last read by the wake-up listener: at 1 every transaction that ran NOTIFY fails at COMMIT; publishers stop notifying at publisher.Config.WakeQueueLimit (0.5)."}),
		clockOffset: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameRelayClockOffset,
			Help: "The relay's clock minus the database's, as last measured (at start and on every recovery run); 0 while the check is off (poller.Config.MaxClockOffset)."}),
		listenerUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: NameRelayListenerUp,
			Help: "1 while the relay's wake-up listener is listening, 0 while it is down or found deaf (the relay polls only); absent without a listener."}, nil),
		listenerDown: counter(NameRelayListenerDown, "Sessions of the wake-up listener that ended, by reason: deaf (its probe notification never arrived: a transaction pooler; the relay polls only) or lost (reconnects).", "reason"),
		wakeUps:      counter(NameRelayWakeUps, "Notifications the wake-up listener received, by what they woke: loop, discovery, dlq_retry or nothing.", "target"),
		partitions:   counter(NameOutboxPartitions, "Outbox partitions the clean-up job created ahead or removed (dropped or detached, outbox.partitions.retention), by action: created, removed.", "action"),
		partsKept: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameOutboxPartitionsKept,
			Help: "Expired outbox partitions the last maintenance run kept: they still hold a PENDING, IN_PROCESS or FAILED row, or their locks were not granted within 2s. Growing: a row that never finishes holds its partition (and its disk)."}),
		jobs: newJobMetrics(),
	}
	for _, c := range []prometheus.Collector{h.sent, h.failed, h.unavailable, h.stale, h.polls, h.pollErrors,
		h.claimed, h.pollDelay, h.outage, h.notifyQueue, h.clockOffset, h.listenerUp, h.listenerDown, h.wakeUps,
		h.partitions, h.partsKept} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := h.jobs.register(reg); err != nil {
		return nil, err
	}
	return h, nil
}

// PollDone implements poller.Hooks. The first poll of an event type
// creates its series at 0 (sent, failed, unavailable, stale finalizes,
// poll errors, claimed, and oncebox_outbox_broker_outage): an alert on one
// of them has a series to watch before the first event of its kind. The
// relay polls every event type of the configuration at start, and a
// discovered one at its discovery.
func (h *PollerHooks) PollDone(i poller.PollInfo) {
	h.init(i.EventType)
	h.polls.WithLabelValues(i.EventType).Inc()
	if i.Claimed > 0 {
		h.claimed.WithLabelValues(i.EventType).Add(float64(i.Claimed))
	}
	if i.Err != nil {
		h.pollErrors.WithLabelValues(i.EventType).Inc()
	}
	h.pollDelay.WithLabelValues(i.EventType).Set(i.NextDelay.Seconds())
}

// init creates the series of eventType at 0, once.
func (h *PollerHooks) init(eventType string) {
	if _, done := h.seen.Load(eventType); done {
		return
	}
	for _, c := range []*prometheus.CounterVec{h.sent, h.unavailable, h.stale, h.pollErrors, h.claimed} {
		c.WithLabelValues(eventType)
	}
	h.failed.WithLabelValues(eventType, "false")
	h.failed.WithLabelValues(eventType, "true")
	// Not Set(0): a BrokerOutage that ran first keeps its 1.
	h.outage.WithLabelValues(eventType)
	h.seen.Store(eventType, struct{}{})
}

// Sent implements poller.Hooks.
func (h *PollerHooks) Sent(eventType string, ids []oncebox.EventID) {
	h.sent.WithLabelValues(eventType).Add(float64(len(ids)))
}

// SendFailed implements poller.Hooks.
func (h *PollerHooks) SendFailed(eventType string, failures []poller.Failure) {
	var final, retried int
	for _, f := range failures {
		if f.Final {
			final++
		} else {
			retried++
		}
	}
	if retried > 0 {
		h.failed.WithLabelValues(eventType, strconv.FormatBool(false)).Add(float64(retried))
	}
	if final > 0 {
		h.failed.WithLabelValues(eventType, strconv.FormatBool(true)).Add(float64(final))
	}
}

// BrokerUnavailable implements poller.Hooks.
func (h *PollerHooks) BrokerUnavailable(eventType string, released int, _ error) {
	h.unavailable.WithLabelValues(eventType).Add(float64(released))
}

// BrokerOutage implements poller.Hooks.
func (h *PollerHooks) BrokerOutage(eventType string, down bool, _ error) {
	v := 0.0
	if down {
		v = 1
	}
	h.outage.WithLabelValues(eventType).Set(v)
}

// StaleFinalize implements poller.Hooks.
func (h *PollerHooks) StaleFinalize(eventType string, want, got int) {
	if want > got {
		h.stale.WithLabelValues(eventType).Add(float64(want - got))
	}
}

// NotifyQueueUsage implements poller.Hooks.
func (h *PollerHooks) NotifyQueueUsage(ratio float64) { h.notifyQueue.Set(ratio) }

// ClockOffset implements poller.Hooks.
func (h *PollerHooks) ClockOffset(offset time.Duration) {
	h.clockOffset.Set(offset.Seconds())
}

// Woken implements poller.WakeHooks.
func (h *PollerHooks) Woken(_ string, target poller.WakeTarget) {
	h.wakeUps.WithLabelValues(wakeTargetLabel(target)).Inc()
}

func wakeTargetLabel(t poller.WakeTarget) string {
	switch t {
	case poller.WokeLoop:
		return "loop"
	case poller.WokeDiscovery:
		return "discovery"
	case poller.WokeDLQRetry:
		return "dlq_retry"
	default:
		return "nothing"
	}
}

// ListenerUp implements poller.WakeHooks.
func (h *PollerHooks) ListenerUp() { h.listenerUp.WithLabelValues().Set(1) }

// ListenerDown implements poller.WakeHooks.
func (h *PollerHooks) ListenerDown(err error) {
	reason := ListenerLost
	if errors.Is(err, poller.ErrListenerDeaf) {
		reason = ListenerDeaf
	}
	h.listenerDown.WithLabelValues(ListenerDeaf) // both series exist once one session ended
	h.listenerDown.WithLabelValues(ListenerLost)
	h.listenerDown.WithLabelValues(reason).Inc()
	h.listenerUp.WithLabelValues().Set(0)
}

// PartitionsMaintained implements poller.PartitionHooks.
func (h *PollerHooks) PartitionsMaintained(st dialects.PartitionStats, _ error) {
	h.partitions.WithLabelValues("created").Add(float64(st.Created))
	h.partitions.WithLabelValues("removed").Add(float64(st.Removed))
	h.partsKept.Set(float64(st.Kept))
}

// JobDone implements poller.Hooks.
func (h *PollerHooks) JobDone(j poller.JobInfo) {
	h.jobs.done(j.Job, j.Skipped, j.Rows, j.Duration.Seconds(), j.NextDelay.Seconds(), j.Err)
}
