package metrics

import "slices"

// Names returns the name of every metric this package can register, sorted,
// for the dashboards test. Histograms are listed by their base name (without
// _bucket, _sum, _count).
func Names() []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}
