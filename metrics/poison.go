package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncebox/watermill-oncebox/dlq"
)

// PoisonHooks counts what a middleware.PoisonQueue does. Build it with
// NewPoisonHooks and set its methods as middleware.PoisonConfig.OnParked,
// OnStoreFailed and OnNacked. It is safe for concurrent use.
type PoisonHooks struct {
	parked        *prometheus.CounterVec
	storeFailures *prometheus.CounterVec
	nacked        *prometheus.CounterVec
}

// NewPoisonHooks creates the poison queue metrics
// (oncebox_poison_parked_total, oncebox_poison_store_failures_total,
// oncebox_poison_nacked_total) and registers them with reg.
func NewPoisonHooks(reg prometheus.Registerer) (*PoisonHooks, error) {
	h := &PoisonHooks{
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NamePoisonParked,
			Help: "Messages whose handler failed and that the poison queue stored in the DLQ, by handler."}, []string{"handler"}),
		storeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NamePoisonStoreFailures,
			Help: "Messages the poison queue could not store in the DLQ (nacked, redelivered), by handler."}, []string{"handler"}),
		nacked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NamePoisonNacked,
			Help: "Handler errors the poison queue took for transient and returned (nacked, redelivered) instead of parking, by handler. A rate that does not fall means a message comes back forever."}, []string{"handler"}),
	}
	for _, c := range []prometheus.Collector{h.parked, h.storeFailures, h.nacked} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// Handlers creates the series of the named handlers at 0, so that an
// alert on them (a rate of oncebox_poison_nacked_total that does not fall)
// has a series to watch before the first message fails. NewServiceHooks
// sets it as service.Hooks.OnHandlers: the service calls it with its
// router's handlers when Run starts.
func (h *PoisonHooks) Handlers(names []string) {
	for _, n := range names {
		for _, c := range []*prometheus.CounterVec{h.parked, h.storeFailures, h.nacked} {
			c.WithLabelValues(n)
		}
	}
}

// OnParked is a middleware.PoisonConfig.OnParked: it counts a parked message.
func (h *PoisonHooks) OnParked(handler string, _ error) {
	h.parked.WithLabelValues(handler).Inc()
}

// OnStoreFailed is a middleware.PoisonConfig.OnStoreFailed: it counts a
// message that could not be stored.
func (h *PoisonHooks) OnStoreFailed(handler string, _ error) {
	h.storeFailures.WithLabelValues(handler).Inc()
}

// OnNacked is a middleware.PoisonConfig.OnNacked: it counts a handler error
// that was returned for redelivery instead of parked.
func (h *PoisonHooks) OnNacked(handler string, _ error) {
	h.nacked.WithLabelValues(handler).Inc()
}

// DLQActionHooks counts the operator actions on the DLQ (REST handler and
// CLI alike, both go through a dlq.Store). Build it with NewDLQActionHooks
// and set its OnAction as dlq.Config.OnAction. It is safe for concurrent use.
type DLQActionHooks struct {
	actions *prometheus.CounterVec
}

// NewDLQActionHooks creates oncebox_dlq_actions_total and registers it with
// reg.
func NewDLQActionHooks(reg prometheus.Registerer) (*DLQActionHooks, error) {
	h := &DLQActionHooks{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameDLQActions,
			Help: "DLQ rows changed by operator actions, by action: retry, resolve, reopen, delete."}, []string{"action"}),
	}
	if err := reg.Register(h.actions); err != nil {
		return nil, err
	}
	for _, a := range []string{dlq.ActionRetry, dlq.ActionResolve, dlq.ActionReopen, dlq.ActionDelete} {
		h.actions.WithLabelValues(a) // at 0 until the first action
	}
	return h, nil
}

// OnAction is a dlq.Config.OnAction: it adds the n rows an action changed.
func (h *DLQActionHooks) OnAction(action string, n int) {
	if n > 0 {
		h.actions.WithLabelValues(action).Add(float64(n))
	}
}
