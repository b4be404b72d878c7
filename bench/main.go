// Command bench measures oncebox against its peers on the services of this
// machine and prints a table; it writes the same figures to
// bench/results/latest.md and bench/results/latest.json. Speed is reported as
// ratios against a baseline measured in the same run, never asserted in tests.
//
//	go run ./bench                          # every scenario
//	go run ./bench -scenarios relay,idle    # some scenarios
//	go run ./bench -scale 0.2 -out /tmp/b   # a quick smoke run
//	go run ./bench -scenarios mariadb-relay,mariadb-idle   # MariaDB only
//	go run ./bench -scenarios relay -cpuprofile /tmp/relay.pprof   # with a CPU profile
//	go run ./bench -own-cluster -scenarios relay,xmin   # on a throw-away cluster, autovacuum on (root)
//	go run ./bench -own-cluster -scenarios partitions   # plain against partitioned outbox, 1,000,000 rows
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// scenario is one benchmark: it returns the rows of its table.
type scenario struct {
	name string
	desc string
	run  func(ctx context.Context, env *env) ([]row, error)
}

var scenarios = []scenario{
	{"publish", "publishing inside a business transaction vs a raw multi-row INSERT", runPublish},
	{"relay", "relay throughput from a backlog to a no-op publisher: oncebox poller and Watermill's forwarder vs a raw SQL claim-and-mark loop", runRelay},
	{"backlog", "relay throughput as the backlog grows: the raw claim-and-mark loop and the oncebox poller (tuned and defaults) at 1,000,000 rows vs 100,000, Watermill's forwarder (defaults) at 300,000 within a deadline vs 100,000; the bench process's memory (VmRSS, Go heap) before and at the peak of each poller drain", runBacklog},
	{"idle", "SQL statements and transactions per hour for one idle event type: oncebox poller (defaults, simulated hour) vs Watermill's forwarder (defaults)", runIdle},
	{"mariadb-relay", "the relay scenario on MariaDB: the raw loop through the MySQL dialect's Claim and MarkProcessed, the oncebox poller and Watermill's forwarder over watermill-sql's MySQL adapters", runMariaDBRelay},
	{"mariadb-idle", "the idle scenario on MariaDB: statements and transactions per hour for one idle event type, counted by a counting database/sql driver and by MariaDB's status counters", runMariaDBIdle},
	{"latency", "commit-to-publish latency at a steady 300 events/s, one event per business transaction", runLatency},
	{"sqlite-relay", "the relay scenario on SQLite (a file, modernc.org/sqlite): the raw loop through the SQLite dialect's Claim and MarkProcessed and the oncebox poller; Watermill's anchor is the PostgreSQL forwarder of the relay scenario (watermill-sqlite is not served here)", runSQLiteRelay},
	{"sqlite-latency", "the latency scenario on SQLite: commit to publish at 300 events/s with the in-process wake-up (package inprocess), without it, and tuned for polling", runSQLiteLatency},
	{"sqlite-idle", "the idle scenario on SQLite: statements and transactions per simulated hour for one idle event type, counted by a counting database/sql driver", runSQLiteIdle},
	{"brokers", "relay throughput to Kafka (in-process kfake) and RabbitMQ with confirms: oncebox poller vs Watermill's forwarder", runBrokers},
	{"ordering", "per-key ordering: one type with 1,000 keys, ordered vs unordered, and one key, drained by one tuned poller to a no-op publisher", runOrdering},
	{"console", "the operator's console over a DLQ of 1,000,000 rows: the dead letters list (first page, filtered, a deep keyset page), its count and the fingerprint view, each query's median of 5 runs vs a count(*) of the table; the plans on stderr", runConsole},
	{"soak", "a steady load (-soak-rate events/s for -soak-duration) on a cluster of its own with autovacuum on: commit-to-publish p50/p99, outbox size, dead tuples and statements per event, per interval; exactly once checked at the end (not in the default run)", runSoak},
	{"writes", "writes per event on PostgreSQL (issue 28): today's claim + mark PROCESSED (+ the clean-up's delete), claim + DELETE on finalize, and one DELETE … FOR UPDATE SKIP LOCKED … RETURNING in a transaction held during the send, each against the raw claim-and-mark loop, 100,000 rows, batch 1,000, medians of 5 rounds; rows/s and bytes of WAL per event", runWrites},
	{"xmin", "a held xmin horizon: producers at a steady rate, a relay loop (the dialect's Claim, timed, and MarkProcessed), sampled every 15 s: the claim's p50/p95, dead and live tuples, autovacuums, table and index size; without and with a session holding a REPEATABLE READ transaction with an xid open, on a plain outbox and on one partitioned by the minute (retention drop, ttl 15s); needs autovacuum on (-own-cluster)", runXmin},
	{"partitions", "a plain outbox against one partitioned by the hour (outbox.partitions), 1,000,000 rows over 10 hours (900,000 PROCESSED, 100,000 PENDING): size, the raw claim-and-mark loop over the PENDING rows, and the retention of the 9 oldest hours (the clean-up's DeleteProcessed against MaintainPartitions dropping partitions): time, WAL, size after", runPartitions},
	{"inbox", "per-message cost of the inbox middleware (no cache, in-process cache, Redis) vs a bare handler, new events and duplicates", runInbox},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run runs the scenarios asked for and writes the report. It returns instead
// of exiting so that every deferred clean-up runs on an error too.
func run() error {
	var (
		only    = flag.String("scenarios", "", "comma-separated scenarios to run (default: all)")
		dsn     = flag.String("postgres", envOr("ONCEBOX_BENCH_POSTGRES_DSN", "postgres://root@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL DSN")
		mariadb = flag.String("mariadb", envOr("ONCEBOX_BENCH_MARIADB_DSN", "root@tcp(127.0.0.1:3306)/test?parseTime=true&loc=UTC"),
			"MariaDB DSN (go-sql-driver/mysql) of the mariadb scenarios; they create and drop a database oncebox_bench_<pid>_<random>")
		out     = flag.String("out", "bench/results", "directory of latest.md and latest.json")
		scale   = flag.Float64("scale", 1, "multiplies the amount of work of every scenario (0.1 for a smoke run)")
		timeout = flag.Duration("timeout", 30*time.Minute, "overall time budget")
		fwdDL   = flag.Duration("forwarder-deadline", 2*time.Minute,
			"how long the backlog scenario lets Watermill's forwarder drain its largest backlog (300,000 rows at scale 1); what it delivered by then is the figure")
		cpuProf = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
		own     = flag.Bool("own-cluster", false,
			"run the PostgreSQL scenarios on a throw-away primary with autovacuum on, made by scripts/pgcluster.sh (as root) and removed when the run ends, on an error or an interrupt too; -postgres is then ignored")
	)
	flag.DurationVar(&soakDuration, "soak-duration", 60*time.Minute, "how long the soak scenario produces")
	flag.IntVar(&soakRate, "soak-rate", 2000, "the soak scenario's steady load, events per second")
	flag.DurationVar(&soakCleanUpTTL, "soak-clean-up-ttl", time.Minute, "the soak scenario's outbox clean-up ttl")
	flag.DurationVar(&soakInterval, "soak-interval", time.Minute, "the soak scenario's sampling interval")
	flag.Parse()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile %s: %w", *cpuProf, err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// An interrupted run cancels ctx instead of dying, so that the deferred
	// clean-ups drop its schema and databases; a second signal kills it.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	fmt.Fprintf(stderr, "bench: this run's scratch schema (and MariaDB database): %s\n", benchSchema)

	server := "the server of -postgres"
	if *own {
		c, err := newOwnCluster(ctx)
		// Deferred before the error check: a creation that failed half-way
		// is removed too, and so is the cluster on an interrupt (ctx is
		// cancelled, run returns, the deferred calls run).
		defer c.remove()
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: -own-cluster: %s at %s (autovacuum on)\n", c.name, c.dsn)
		*dsn = c.dsn
		server = "an own cluster " + c.name + " (scripts/pgcluster.sh, autovacuum on)"
	}
	e, err := newEnv(ctx, *dsn, *mariadb, *scale)
	if err != nil {
		return err
	}
	defer e.close()
	e.forwarderDeadline = *fwdDL

	rep := report{Started: time.Now().UTC(), Machine: machine() + ", PostgreSQL: " + server + ", autovacuum " + e.autovacuum(ctx)}
	for _, s := range scenarios {
		if (*only == "" && s.name == "soak") || (*only != "" && !contains(strings.Split(*only, ","), s.name)) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: running %s…\n", s.name)
		start := time.Now()
		rows, err := s.run(ctx, e)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		rep.Scenarios = append(rep.Scenarios, scenarioResult{Name: s.name, Description: s.desc, Rows: rows,
			Seconds: time.Since(start).Seconds()})
	}
	fmt.Print(rep.markdown())
	return rep.write(*out)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.TrimSpace(v) == s {
			return true
		}
	}
	return false
}

// stderr receives progress lines.
var stderr = os.Stderr
