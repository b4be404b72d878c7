// Package metrics exposes what oncebox does as Prometheus metrics: poller
// hooks (NewPollerHooks), inbox hooks (NewInboxHooks, InboxHooks.OnCleanerRun),
// poison queue hooks (NewPoisonHooks), DLQ action hooks (NewDLQActionHooks),
// backlog gauges computed by cached COUNT queries (NewBacklogCollector) and,
// on PostgreSQL, the age of the oldest xmin holder (NewXminCollector).
//
// It lives in its own package so that programs which do not use Prometheus
// do not link client_golang. See docs/metrics.md.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace is the prefix of every metric name.
const Namespace = "oncebox"

// The names of the metrics this package registers.
const (
	NameOutboxEventsSent        = "oncebox_outbox_events_sent_total"
	NameOutboxEventsFailed      = "oncebox_outbox_events_failed_total"
	NameOutboxBrokerUnavailable = "oncebox_outbox_broker_unavailable_total"
	NameOutboxBrokerOutage      = "oncebox_outbox_broker_outage"
	NameOutboxStaleFinalizes    = "oncebox_outbox_stale_finalizes_total"
	NameOutboxPolls             = "oncebox_outbox_polls_total"
	NameOutboxPollErrors        = "oncebox_outbox_poll_errors_total"
	NameOutboxClaimedEvents     = "oncebox_outbox_claimed_events_total"
	NameOutboxPollDelay         = "oncebox_outbox_poll_delay_seconds"
	NameJobRuns                 = "oncebox_job_runs_total"
	NameJobRunDuration          = "oncebox_job_run_duration_seconds"
	NameJobRows                 = "oncebox_job_rows_total"
	NameJobDelay                = "oncebox_job_delay_seconds"
	NameNotifyQueueUsage        = "oncebox_notify_queue_usage_ratio"
	NameRelayClockOffset        = "oncebox_relay_clock_offset_seconds"
	NameRelayListenerUp         = "oncebox_relay_listener_up"
	NameRelayListenerDown       = "oncebox_relay_listener_down_total"
	NameRelayWakeUps            = "oncebox_relay_wake_ups_total"
	NameOutboxPartitions        = "oncebox_outbox_partitions_total"
	NameOutboxPartitionsKept    = "oncebox_outbox_partitions_kept"

	NameInboxConsumed     = "oncebox_inbox_consumed_total"
	NameInboxDuplicates   = "oncebox_inbox_duplicates_total"
	NameInboxFailed       = "oncebox_inbox_failed_total"
	NameInboxCacheErrors  = "oncebox_inbox_cache_errors_total"
	NameInboxCacheLookups = "oncebox_inbox_cache_lookups_total"

	NamePoisonParked        = "oncebox_poison_parked_total"
	NamePoisonStoreFailures = "oncebox_poison_store_failures_total"
	NamePoisonNacked        = "oncebox_poison_nacked_total"
	NameDLQActions          = "oncebox_dlq_actions_total"

	NameOutboxEvents              = "oncebox_outbox_events"
	NameOutboxOldestPendingAge    = "oncebox_outbox_oldest_pending_age_seconds"
	NameDLQEvents                 = "oncebox_dlq_events"
	NameBacklogRefreshErrors      = "oncebox_backlog_refresh_errors_total"
	NameBacklogLastRefreshSuccess = "oncebox_backlog_last_refresh_success_timestamp_seconds"

	NamePostgresOldestXminAge     = "oncebox_postgres_oldest_xmin_age_seconds"
	NamePostgresOldestXminAgeXids = "oncebox_postgres_oldest_xmin_age_xids"
	NamePostgresXminRefreshErrors = "oncebox_postgres_xmin_refresh_errors_total"
)

// names lists every metric name above; the registration code builds its
// metrics from these constants and the dashboards test checks against it
// (export_test.go).
var names = []string{
	NameOutboxEventsSent, NameOutboxEventsFailed, NameOutboxBrokerUnavailable, NameOutboxBrokerOutage,
	NameOutboxStaleFinalizes, NameOutboxPolls, NameOutboxPollErrors, NameOutboxClaimedEvents,
	NameOutboxPollDelay, NameJobRuns, NameJobRunDuration, NameJobRows, NameJobDelay, NameNotifyQueueUsage, NameRelayClockOffset,
	NameRelayListenerUp, NameRelayListenerDown, NameRelayWakeUps, NameOutboxPartitions, NameOutboxPartitionsKept,
	NameInboxConsumed, NameInboxDuplicates, NameInboxFailed, NameInboxCacheErrors,
	NameInboxCacheLookups,
	NamePoisonParked, NamePoisonStoreFailures, NamePoisonNacked, NameDLQActions,
	NameOutboxEvents, NameOutboxOldestPendingAge, NameDLQEvents, NameBacklogRefreshErrors,
	NameBacklogLastRefreshSuccess,
	NamePostgresOldestXminAge, NamePostgresOldestXminAgeXids, NamePostgresXminRefreshErrors,
}

// reuse registers c with reg and returns it, or returns the collector of
// the same description already registered there, so that PollerHooks and
// InboxHooks can share the job metrics on one registry.
func reuse[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
