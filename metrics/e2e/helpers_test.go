package e2e_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

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
