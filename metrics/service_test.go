package metrics_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
)

func TestServiceHooksCountWhatTheyAreTold(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewServiceHooks(reg)
	require.NoError(t, err)
	require.NotNil(t, h.Poller)
	require.NotNil(t, h.Inbox)
	h.OnParked("ship-order", errors.New("bad payload"))
	h.OnDLQAction("retry", 3)
	h.OnInboxCleanUp(middleware.JobResult{Rows: 4})
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_poison_parked_total", map[string]string{"handler": "ship-order"}))
	require.Equal(t, 3.0, mustValue(t, reg, "oncebox_dlq_actions_total", map[string]string{"action": "retry"}))
	require.Equal(t, 4.0, mustValue(t, reg, "oncebox_job_rows_total", map[string]string{"oncebox_job": middleware.JobInboxCleanUp}))

	// A second set on the same registry collides: the error says so.
	_, err = metrics.NewServiceHooks(reg)
	require.Error(t, err)
	var are prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &are)
}
