package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncebox/watermill-oncebox/service"
)

// NewServiceHooks registers the relay's, the inbox's, the poison queue's and
// the DLQ's collectors on reg and returns them as the hooks of the entry
// point: service.New(…, service.WithHooks(hooks)). The backlog collector
// (NewBacklogCollector) reads the database and is registered apart, in one
// replica or in each (docs/metrics.md).
func NewServiceHooks(reg prometheus.Registerer) (service.Hooks, error) {
	relay, err1 := NewPollerHooks(reg)
	inbox, err2 := NewInboxHooks(reg)
	poison, err3 := NewPoisonHooks(reg)
	actions, err4 := NewDLQActionHooks(reg)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return service.Hooks{}, err
	}
	return service.Hooks{Poller: relay, Inbox: inbox, OnParked: poison.OnParked, OnNacked: poison.OnNacked,
		OnStoreFailed: poison.OnStoreFailed, OnDLQAction: actions.OnAction, OnInboxCleanUp: inbox.OnCleanerRun,
		OnHandlers: poison.Handlers}, nil
}
