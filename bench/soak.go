package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/oncebox/watermill-oncebox/internal/soak"
)

// The soak scenario's flags (main registers them).
var (
	soakDuration   time.Duration
	soakRate       int
	soakCleanUpTTL time.Duration
	soakInterval   time.Duration
)

// runSoak runs internal/soak on a cluster of its own with autovacuum on
// (scripts/pgcluster.sh, as root), prints the per-interval table on stderr
// as it goes and returns the summary rows. The cluster is removed at the
// end, on an error too.
func runSoak(ctx context.Context, _ *env) ([]row, error) {
	name := fmt.Sprintf("ob_soak_%d", os.Getpid())
	script := "scripts/pgcluster.sh"
	out, err := exec.CommandContext(ctx, "bash", script, "create", name).CombinedOutput()
	defer func() {
		if b, err := exec.Command("bash", script, "remove", name).CombinedOutput(); err != nil {
			fmt.Fprintf(stderr, "bench: soak: remove %s: %v\n%s", name, err, b)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("%s create %s: %w\n%s", script, name, err, out)
	}
	dsn := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRIMARY_DSN="); ok {
			dsn = v
		}
	}
	if dsn == "" {
		return nil, fmt.Errorf("%s create printed no PRIMARY_DSN:\n%s", script, out)
	}
	fmt.Fprintf(stderr, "bench: soak: cluster %s at %s (autovacuum on), %s at %d events/s, clean-up ttl %s\n",
		name, dsn, soakDuration, soakRate, soakCleanUpTTL)
	res, err := soak.Run(ctx, soak.Options{DSN: dsn, Duration: soakDuration, Rate: soakRate, CleanUpTTL: soakCleanUpTTL,
		Interval: soakInterval,
		Progress: func(s soak.Sample) {
			fmt.Fprintf(stderr, "bench: soak: %s %3d: table %.1f MB, indexes %.1f MB, live %d, dead %d, autovacuums %d, %d statements, %d xacts, committed %d, delivered %d, load %.2f\n",
				time.Now().UTC().Format("15:04:05"), s.Index, float64(s.TableBytes)/(1<<20), float64(s.IndexBytes)/(1<<20),
				s.Live, s.Dead, s.AutoVacuums, s.Statements, s.Xacts, s.CommittedSoFar, s.DeliveredSoFar, s.Load1)
		}})
	if res != nil {
		fmt.Fprintf(stderr, "bench: soak: per interval:\n%s", res.Table())
	}
	if err != nil {
		return nil, err
	}
	var maxP99 time.Duration
	var maxTotal int64
	for _, s := range res.Samples {
		maxP99 = max(maxP99, s.P99)
		maxTotal = max(maxTotal, s.TotalBytes)
	}
	note := fmt.Sprintf("%d committed in %s; %d delivered, %d duplicates, %d lost", res.Committed,
		res.Elapsed.Round(time.Second), res.Delivered, res.Duplicates, res.Lost)
	return []row{
		{Case: "achieved rate", Value: res.Rate, Unit: "events/s", Note: note},
		{Case: "commit-to-publish p50, whole run", Value: float64(res.P50) / 1e6, Unit: "ms"},
		{Case: "commit-to-publish p99, whole run", Value: float64(res.P99) / 1e6, Unit: "ms"},
		{Case: "commit-to-publish p99, worst interval", Value: float64(maxP99) / 1e6, Unit: "ms"},
		{Case: "outbox total size, largest sample", Value: float64(maxTotal) / (1 << 20), Unit: "MB"},
		{Case: "exactly once (1 = yes)", Value: b2f(res.ExactlyOnce()), Unit: ""},
	}, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
