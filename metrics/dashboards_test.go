package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dlq"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
	"github.com/oncebox/watermill-oncebox/poller"
)

var (
	// Removed before looking for metric names: string literals (label
	// values, regexps), label matchers, range selectors and the label lists
	// of by/without/on/ignoring/group_left/group_right.
	stringLit   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	labelLists  = regexp.MustCompile(`(?i)\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identifier  = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
	labelValues = regexp.MustCompile(`label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)`)
)

// metricNames returns the metric names an expression selects: identifiers
// that are not functions (followed by "("), keywords, numbers or labels.
func metricNames(expr string) []string {
	e := stringLit.ReplaceAllString(expr, `""`)
	e = labelLists.ReplaceAllString(e, " ")
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range identifier.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] == '$' || (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9') || e[loc[0]-1] == '.') {
			continue // a variable or a number's exponent
		}
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promqlWords[strings.ToLower(name)] {
			continue
		}
		out = append(out, name)
	}
	return out
}

func TestMetricNamesParser(t *testing.T) {
	t.Parallel()
	got := metricNames(`histogram_quantile(0.95, sum by (job, le) (rate(a_bucket{job=~"x|y"}[$__rate_interval]))) / on (job) group_left b + 1e3 - time() > bool c_total offset 5m`)
	require.Equal(t, []string{"a_bucket", "b", "c_total"}, got)
}

// panels returns every panel of a dashboard, those of collapsed rows too.
func panels(ps []map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range ps {
		out = append(out, p)
		if nested, ok := p["panels"].([]any); ok {
			var sub []map[string]any
			for _, n := range nested {
				if m, ok := n.(map[string]any); ok {
					sub = append(sub, m)
				}
			}
			out = append(out, panels(sub)...)
		}
	}
	return out
}

// registered returns the base name of every metric family gathered, with
// the histograms' series suffixes.
func registered(t *testing.T, reg prometheus.Gatherer) map[string]bool {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[mf.GetName()+s] = true
			}
		}
	}
	return out
}

// fullRegistry creates every collector of the package and touches every
// label combination the dashboards use, so that each family is gathered.
func fullRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	s := pgtest.NewSchema(t)
	clock := clockwork.NewFakeClockAt(t0)
	publish(t, s, clock, "order-created", 1)
	reg := prometheus.NewPedanticRegistry()
	ph, err := metrics.NewPollerHooks(reg)
	require.NoError(t, err)
	ih, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	poison, err := metrics.NewPoisonHooks(reg)
	require.NoError(t, err)
	actions, err := metrics.NewDLQActionHooks(reg)
	require.NoError(t, err)
	bc, err := metrics.NewBacklogCollector(s.Beginner, s.Dialect, metrics.BacklogConfig{Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(bc))
	exec(t, s, s.Dialect.EventsMoveToDLQ(clock.Now(), 1)) // nothing FAILED; the DLQ stays empty
	_, err = s.Pool.Exec(t.Context(), "UPDATE "+s.Dialect.Tables().Events+" SET status = 'FAILED'")
	require.NoError(t, err)
	exec(t, s, s.Dialect.EventsMoveToDLQ(clock.Now(), 1))
	publish(t, s, clock, "order-created", 1)

	ph.PollDone(poller.PollInfo{EventType: "e", Claimed: 1, NextDelay: time.Second, Err: os.ErrClosed})
	ph.Sent("e", nil)
	ph.SendFailed("e", []poller.Failure{{Final: true}})
	ph.BrokerUnavailable("e", 1, nil)
	ph.BrokerOutage("e", true, nil)
	ph.StaleFinalize("e", 2, 1)
	ph.JobDone(poller.JobInfo{Job: poller.JobRecovery, Rows: 1, Duration: time.Millisecond, NextDelay: time.Second})
	ih.Consumed("")
	ih.Duplicate("", true)
	ih.Failed("", nil)
	ih.CacheError(nil)
	ih.OnCleanerRun(middleware.JobResult{Rows: 1})
	poison.OnParked("h", nil)
	poison.OnStoreFailed("h", nil)
	poison.OnNacked("h", nil)
	actions.OnAction(dlq.ActionRetry, 1)
	return reg
}

// TestNamesMatchRegistration keeps metrics.Names in step with what the
// collectors register.
func TestNamesMatchRegistration(t *testing.T) {
	t.Parallel()
	reg := fullRegistry(t)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	slices.Sort(got)
	require.Equal(t, metrics.Names(), got)
}

// TestDashboardsQueryOnlyRegisteredMetrics parses every expr of every
// dashboard and requires each metric it selects to be one the package
// registers: dashboards of metrics that no longer exist show nothing,
// silently.
func TestDashboardsQueryOnlyRegisteredMetrics(t *testing.T) {
	t.Parallel()
	known := registered(t, fullRegistry(t))
	for _, n := range metrics.Names() {
		require.True(t, known[n], "%s is in Names and registered", n)
	}
	files, err := filepath.Glob("../docs/dashboards/*.json")
	require.NoError(t, err)
	require.Len(t, files, 3, "relay, inbox and dlq dashboards")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var d struct {
			SchemaVersion int              `json:"schemaVersion"`
			Title         string           `json:"title"`
			UID           string           `json:"uid"`
			Panels        []map[string]any `json:"panels"`
			Templating    struct {
				List []struct {
					Definition string `json:"definition"`
				} `json:"list"`
			} `json:"templating"`
		}
		require.NoError(t, json.Unmarshal(raw, &d), f)
		require.GreaterOrEqual(t, d.SchemaVersion, 36, f)
		require.NotEmpty(t, d.Title, f)
		require.NotEmpty(t, d.UID, f)
		exprs := 0
		var used []string
		for _, p := range panels(d.Panels) {
			targets, _ := p["targets"].([]any)
			if p["type"] != "row" {
				require.NotEmpty(t, targets, "%s: panel %q has queries", f, p["title"])
			}
			for _, tg := range targets {
				expr, _ := tg.(map[string]any)["expr"].(string)
				require.NotEmpty(t, expr, "%s: panel %q", f, p["title"])
				exprs++
				names := metricNames(expr)
				require.NotEmpty(t, names, "%s: %q selects a metric", f, expr)
				for _, n := range names {
					require.True(t, known[n], "%s: panel %q queries %s, which package metrics does not register", f, p["title"], n)
					used = append(used, n)
				}
			}
		}
		require.GreaterOrEqual(t, exprs, 3, f)
		for _, v := range d.Templating.List {
			for _, m := range labelValues.FindAllStringSubmatch(v.Definition, -1) {
				require.True(t, known[m[1]], "%s: variable queries %s, which is not registered", f, m[1])
			}
		}
		t.Logf("%s: %d queries over %d metrics", filepath.Base(f), exprs, len(slices.Compact(slices.Sorted(slices.Values(used)))))
	}
}
