package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncebox/watermill-oncebox/middleware"
)

// The values of the label result of oncebox_inbox_cache_lookups_total. There
// is no "error": CacheError does not tell a failed lookup from a failed
// addition (see docs/metrics.md); failures are in
// oncebox_inbox_cache_errors_total.
const (
	CacheHit  = "hit"
	CacheMiss = "miss"
)

// Duplicate sources, the values of the label source of
// oncebox_inbox_duplicates_total.
const (
	SourceCache = "cache"
	SourceTable = "table"
)

// InboxHooks implements middleware.InboxHooks with Prometheus metrics. Build
// it with NewInboxHooks, set it as middleware.InboxConfig.Hooks and its
// OnCleanerRun as middleware.InboxCleanerConfig.OnRun. It is safe for
// concurrent use.
type InboxHooks struct {
	consumed    *prometheus.CounterVec
	duplicates  *prometheus.CounterVec
	failed      *prometheus.CounterVec
	cacheErrors prometheus.Counter
	lookups     *prometheus.CounterVec
	jobs        *jobMetrics
	seen        sync.Map // namespace → struct{}: its series exist
}

var _ middleware.InboxHooks = (*InboxHooks)(nil)

// NewInboxHooks creates the inbox metrics and registers them with reg. The
// job metrics (oncebox_job_*) are shared with PollerHooks on the same
// registry.
func NewInboxHooks(reg prometheus.Registerer) (*InboxHooks, error) {
	ns := []string{"inbox_namespace"}
	h := &InboxHooks{
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameInboxConsumed,
			Help: "New messages handled successfully by the inbox."}, ns),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameInboxDuplicates,
			Help: "Messages dropped as duplicates, by where the id was found: cache or table."}, []string{"inbox_namespace", "source"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameInboxFailed,
			Help: "Messages whose handler failed, whose key was missing, or whose inbox transaction failed."}, ns),
		cacheErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: NameInboxCacheErrors,
			Help: "Failed cache operations; the table decided instead."}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameInboxCacheLookups,
			Help: "Inbox cache lookups by result: hit or miss."}, []string{"result"}),
		jobs: newJobMetrics(),
	}
	for _, c := range []prometheus.Collector{h.consumed, h.duplicates, h.failed, h.cacheErrors, h.lookups} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := h.jobs.register(reg); err != nil {
		return nil, err
	}
	h.lookups.WithLabelValues(CacheHit) // at 0 until the first lookup
	h.lookups.WithLabelValues(CacheMiss)
	return h, nil
}

// init creates the series of namespace at 0, once: its first message
// makes its failures and duplicates series too, so that an alert on them
// has a series before the first one.
func (h *InboxHooks) init(namespace string) {
	if _, done := h.seen.Load(namespace); done {
		return
	}
	h.consumed.WithLabelValues(namespace)
	h.failed.WithLabelValues(namespace)
	h.duplicates.WithLabelValues(namespace, SourceCache)
	h.duplicates.WithLabelValues(namespace, SourceTable)
	h.seen.Store(namespace, struct{}{})
}

// Consumed implements middleware.InboxHooks.
func (h *InboxHooks) Consumed(namespace string) {
	h.init(namespace)
	h.consumed.WithLabelValues(namespace).Inc()
}

// Duplicate implements middleware.InboxHooks.
func (h *InboxHooks) Duplicate(namespace string, cached bool) {
	h.init(namespace)
	if cached {
		h.duplicates.WithLabelValues(namespace, SourceCache).Inc()
		h.lookups.WithLabelValues(CacheHit).Inc()
		return
	}
	h.duplicates.WithLabelValues(namespace, SourceTable).Inc()
}

// CacheMiss implements middleware.InboxHooks.
func (h *InboxHooks) CacheMiss(string) {
	h.lookups.WithLabelValues(CacheMiss).Inc()
}

// Failed implements middleware.InboxHooks.
func (h *InboxHooks) Failed(namespace string, _ error) {
	h.init(namespace)
	h.failed.WithLabelValues(namespace).Inc()
}

// CacheError implements middleware.InboxHooks. The inbox reports both failed
// lookups and failed additions here.
func (h *InboxHooks) CacheError(error) {
	h.cacheErrors.Inc()
}

// OnCleanerRun is a middleware.InboxCleanerConfig.OnRun: it counts the runs
// of the inbox clean-up (oncebox_job_runs_total{oncebox_job="inbox-clean-up"}) and
// the ids it deleted (oncebox_job_rows_total{oncebox_job="inbox-clean-up"}). The
// cleaner reports neither the duration nor the next delay of a run, so the
// job's duration histogram and delay gauge stay empty for it.
func (h *InboxHooks) OnCleanerRun(r middleware.JobResult) {
	result := ResultSucceeded
	switch {
	case r.Skipped:
		result = ResultSkipped
	case r.Err != nil:
		result = ResultFailed
	}
	h.jobs.runs.WithLabelValues(middleware.JobInboxCleanUp, result).Inc()
	if r.Rows > 0 {
		h.jobs.rows.WithLabelValues(middleware.JobInboxCleanUp).Add(float64(r.Rows))
	}
}
