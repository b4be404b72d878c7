package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
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
	xc, err := metrics.NewXminCollector(s.Beginner, metrics.XminConfig{Clock: clock})
	require.NoError(t, err)
	require.NoError(t, reg.Register(xc))
	moveToDLQ(t, s, clock.Now(), 1) // nothing FAILED; the DLQ stays empty
	_, err = s.Pool.Exec(t.Context(), "UPDATE "+s.Dialect.Tables().Events+" SET status = 'FAILED'")
	require.NoError(t, err)
	moveToDLQ(t, s, clock.Now(), 1)
	publish(t, s, clock, "order-created", 1)

	ph.PollDone(poller.PollInfo{EventType: "e", Claimed: 1, NextDelay: time.Second, Err: os.ErrClosed})
	ph.Sent("e", nil)
	ph.SendFailed("e", []poller.Failure{{Final: true}})
	ph.BrokerUnavailable("e", 1, nil)
	ph.BrokerOutage("e", true, nil)
	ph.StaleFinalize("e", 2, 1)
	ph.JobDone(poller.JobInfo{Job: poller.JobRecovery, Rows: 1, Duration: time.Millisecond, NextDelay: time.Second})
	ph.ListenerUp()
	ph.Woken("e", poller.WokeLoop)
	ph.ListenerDown(poller.ErrListenerDeaf)
	ph.PartitionsMaintained(dialects.PartitionStats{Created: 1}, nil)
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

// dashboard is a dashboard file with the queries of its panels.
type dashboard struct {
	file          string
	SchemaVersion int              `json:"schemaVersion"`
	Title         string           `json:"title"`
	UID           string           `json:"uid"`
	Panels        []map[string]any `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// query is one expr of a panel.
type query struct {
	panel, expr string
}

// queries returns every expr of every panel, requiring one per target.
func (d dashboard) queries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, p := range panels(d.Panels) {
		title, _ := p["title"].(string)
		targets, _ := p["targets"].([]any)
		if p["type"] != "row" {
			require.NotEmpty(t, targets, "%s: panel %q has queries", d.file, title)
		}
		for _, tg := range targets {
			expr, _ := tg.(map[string]any)["expr"].(string)
			require.NotEmpty(t, expr, "%s: panel %q", d.file, title)
			out = append(out, query{panel: title, expr: expr})
		}
	}
	return out
}

// dashboards reads every dashboard of docs/dashboards.
func dashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob("../docs/dashboards/*.json")
	require.NoError(t, err)
	require.Len(t, files, 3, "relay, inbox and dlq dashboards")
	var out []dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		d := dashboard{file: filepath.Base(f)}
		require.NoError(t, json.Unmarshal(raw, &d), f)
		out = append(out, d)
	}
	return out
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
	for _, d := range dashboards(t) {
		f := d.file
		require.GreaterOrEqual(t, d.SchemaVersion, 36, f)
		require.NotEmpty(t, d.Title, f)
		require.NotEmpty(t, d.UID, f)
		var used []string
		qs := d.queries(t)
		for _, q := range qs {
			names := metricNames(q.expr)
			require.NotEmpty(t, names, "%s: %q selects a metric", f, q.expr)
			for _, n := range names {
				require.True(t, known[n], "%s: panel %q queries %s, which package metrics does not register", f, q.panel, n)
				used = append(used, n)
			}
		}
		require.GreaterOrEqual(t, len(qs), 3, f)
		for _, v := range d.Templating.List {
			for _, m := range labelValues.FindAllStringSubmatch(v.Definition, -1) {
				require.True(t, known[m[1]], "%s: variable queries %s, which is not registered", f, m[1])
			}
		}
		t.Logf("%s: %d queries over %d metrics", f, len(qs), len(slices.Compact(slices.Sorted(slices.Values(used)))))
	}
}

// targetLabels are the labels Prometheus sets on every series of a target:
// job and instance always, namespace, pod, … with Kubernetes service
// discovery. A metric label of the same name collides with them: the
// scrape renames it exported_<name>, and queries on it find nothing.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "node", "endpoint"}

// TestMetricsHaveNoTargetLabel requires that no metric of the package
// carries a label named like a target label.
func TestMetricsHaveNoTargetLabel(t *testing.T) {
	t.Parallel()
	mfs, err := fullRegistry(t).Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotContains(t, targetLabels, l.GetName(), "%s has a label %q, which collides with a target label", mf.GetName(), l.GetName())
			}
		}
	}
}

// TestDashboardsWorkWithReplicasAndKubernetes checks every query of every
// dashboard against three rules:
//   - it selects each metric with job=~"$job" and instance=~"$instance",
//     and the dashboard has both variables;
//   - a gauge is never summed (or counted) across instances: every replica
//     exports the same backlog, so sum multiplies it by the replica count;
//     the innermost aggregation around a gauge is max, min or avg, or keeps
//     instance in its by clause;
//   - a counter is read through rate, irate or increase;
//   - no query or variable uses a label named like a target label other than
//     job and instance (namespace, pod, …).
func TestDashboardsWorkWithReplicasAndKubernetes(t *testing.T) {
	t.Parallel()
	mfs, err := fullRegistry(t).Gather()
	require.NoError(t, err)
	types := map[string]string{}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType().String()
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				types[mf.GetName()+s] = "COUNTER"
			}
		}
	}
	for _, d := range dashboards(t) {
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
			for _, l := range targetLabels[2:] {
				require.NotRegexp(t, `\b`+l+`\b`, v.Name+" "+v.Definition, "%s: variable %q uses the label %s", d.file, v.Name, l)
			}
		}
		require.True(t, vars["job"] && vars["instance"], "%s has a job and an instance variable", d.file)
		for _, q := range d.queries(t) {
			where := d.file + ": panel " + strconv.Quote(q.panel) + ": " + q.expr
			for _, l := range targetLabels[2:] {
				require.NotRegexp(t, `\b`+l+`\b`, stringLit.ReplaceAllString(q.expr, `""`), "%s: uses the label %s", where, l)
			}
			for _, l := range labelLists.FindAllString(masked(q.expr), -1) {
				require.Regexp(t, `^(?i)[a-z_]+\s*\(\s*[A-Za-z_][A-Za-z0-9_]*(\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*\s*\)$`, l,
					"%s: a by/without/on/ignoring list holds label names only", where)
			}
			for _, s := range selectors(q.expr) {
				require.Contains(t, s.matchers, `job=~"$job"`, "%s: selects %s without job=~\"$job\"", where, s.name)
				require.Contains(t, s.matchers, `instance=~"$instance"`, "%s: selects %s without instance=~\"$instance\"", where, s.name)
				switch types[s.name] {
				case "GAUGE":
					op, by := enclosingAggregation(q.expr, s.pos)
					if (op == "sum" || op == "count") && !slices.Contains(by, "instance") {
						t.Errorf("%s: %s(%s) adds a gauge across instances; every replica exports it: use max by", where, op, s.name)
					}
				case "COUNTER":
					require.Contains(t, []string{"rate", "irate", "increase"}, enclosingFunction(q.expr, s.pos),
						"%s: counter %s is read through rate or increase", where, s.name)
				}
			}
		}
	}
}

// selector is a metric selected by an expression: its name, the text of
// its label matchers and its offset in the expression.
type selector struct {
	name, matchers string
	pos            int
}

// masked returns expr with the content of its string literals replaced by
// x, so that offsets are kept and nothing inside a string is parsed.
func masked(expr string) string {
	return stringLit.ReplaceAllStringFunc(expr, func(s string) string {
		return `"` + strings.Repeat("x", len(s)-2) + `"`
	})
}

// selectors returns the metric selectors of expr (the names metricNames
// finds, located in expr).
func selectors(expr string) []selector {
	m := masked(expr)
	var out []selector
	from := 0
	for _, name := range metricNames(expr) {
		// The first whole-identifier occurrence after the previous one
		// (metricNames returns them in order).
		i := from + strings.Index(m[from:], name)
		for !isSelectorAt(m, i, name) {
			i = i + 1 + strings.Index(m[i+1:], name)
		}
		s := selector{name: name, pos: i}
		end := i + len(name)
		if end < len(m) && m[end] == '{' {
			close := strings.IndexByte(m[end:], '}')
			s.matchers = expr[end : end+close+1]
		}
		out = append(out, s)
		from = end
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isSelectorAt reports whether name at i is a whole identifier.
func isSelectorAt(m string, i int, name string) bool {
	end := i + len(name)
	return (i == 0 || !isIdent(m[i-1])) && (end == len(m) || !isIdent(m[end]))
}

var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true}

// call is a function or aggregation call around an offset: its name and,
// for a prefix "op by (labels) (…)" aggregation, the labels.
type call struct {
	name string
	by   []string
}

// enclosing returns the calls around offset pos of expr, innermost first.
func enclosing(expr string, pos int) []call {
	m := masked(expr)
	var out []call
	depth := 0
	for i := pos - 1; i >= 0; i-- {
		switch m[i] {
		case ')':
			depth++
			continue
		case '(':
			if depth > 0 {
				depth--
				continue
			}
		default:
			continue
		}
		// m[i] opens a call or a group around pos.
		before := strings.TrimRight(m[:i], " \t\n")
		if strings.HasSuffix(before, ")") {
			// "op by (labels) (": find the label list.
			open := strings.LastIndexByte(before, '(')
			labels := strings.Split(before[open+1:len(before)-1], ",")
			for k := range labels {
				labels[k] = strings.TrimSpace(labels[k])
			}
			rest := strings.TrimRight(before[:open], " \t\n")
			rest = strings.TrimRight(rest[:len(rest)-len(trailingIdent(rest))], " \t\n") // drop by or without
			out = append(out, call{name: trailingIdent(rest), by: labels})
			i = open
			continue
		}
		if name := trailingIdent(before); name != "" {
			out = append(out, call{name: name})
		}
	}
	return out
}

// trailingIdent returns the identifier s ends with; "" when none.
func trailingIdent(s string) string {
	j := len(s)
	for j > 0 && isIdent(s[j-1]) {
		j--
	}
	return s[j:]
}

// enclosingAggregation returns the innermost aggregation around pos and the
// labels of its by clause; "" when there is none.
func enclosingAggregation(expr string, pos int) (string, []string) {
	for _, c := range enclosing(expr, pos) {
		if aggregations[c.name] {
			return c.name, c.by
		}
	}
	return "", nil
}

// enclosingFunction returns the innermost call around pos; "" when none.
func enclosingFunction(expr string, pos int) string {
	if cs := enclosing(expr, pos); len(cs) > 0 {
		return cs[0].name
	}
	return ""
}

func TestEnclosingParser(t *testing.T) {
	t.Parallel()
	e := `time() - sum(max by (event_type, instance) (g{a="("})) / sum by (x) (rate(c_total[5m]))`
	ss := selectors(e)
	require.Len(t, ss, 2)
	require.Equal(t, "g", ss[0].name)
	require.Equal(t, `{a="("}`, ss[0].matchers)
	op, by := enclosingAggregation(e, ss[0].pos)
	require.Equal(t, "max", op)
	require.Equal(t, []string{"event_type", "instance"}, by)
	require.Equal(t, "rate", enclosingFunction(e, ss[1].pos))
	op, by = enclosingAggregation(e, ss[1].pos)
	require.Equal(t, "sum", op)
	require.Equal(t, []string{"x"}, by)
}

// notOnADashboard are the documented metrics no dashboard shows, each with
// why.
var notOnADashboard = map[string]string{
	metrics.NamePostgresOldestXminAge:     "a server-wide PostgreSQL gauge for the database's dashboard and alerts, not the relay's (docs/postgresql.md)",
	metrics.NamePostgresOldestXminAgeXids: "a server-wide PostgreSQL gauge for the database's dashboard and alerts, not the relay's (docs/postgresql.md)",
	metrics.NamePostgresXminRefreshErrors: "the xmin collector's own health, beside its gauges",
}

// documentedMetric is a row of a metrics table of docs/metrics.md.
var documentedMetric = regexp.MustCompile("(?m)^\\| `(oncebox_[a-z0-9_]+)`")

// TestEveryDocumentedMetricIsOnADashboard requires every metric of
// docs/metrics.md's tables, and every name the package registers, to be
// queried by a dashboard of docs/dashboards or listed in notOnADashboard
// with why (oncebox_outbox_broker_outage and oncebox_poison_nacked_total
// were documented for alerts and shown nowhere).
func TestEveryDocumentedMetricIsOnADashboard(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range documentedMetric.FindAllStringSubmatch(string(raw), -1) {
		documented[m[1]] = true
	}
	for _, n := range metrics.Names() {
		require.True(t, documented[n], "%s is registered: docs/metrics.md documents it", n)
	}
	shown := map[string]bool{}
	for _, d := range dashboards(t) {
		for _, q := range d.queries(t) {
			for _, n := range metricNames(q.expr) {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(n, s); ok && slices.Contains(metrics.Names(), base) {
						n = base
					}
				}
				shown[n] = true
			}
		}
	}
	for n := range documented {
		if why, ok := notOnADashboard[n]; ok {
			require.False(t, shown[n], "%s is listed as not on a dashboard (%s), but %s", n, why, "a dashboard shows it: drop it from the list")
			continue
		}
		require.True(t, shown[n], "docs/metrics.md documents %s: put it on a dashboard of docs/dashboards, or list it in notOnADashboard with why", n)
	}
}
