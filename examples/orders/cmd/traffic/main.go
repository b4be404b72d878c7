// Command traffic is the orders example's load generator: it POSTs orders
// to the orders API at -rate requests per second for -duration, a fraction
// (-invalid) of them invalid on purpose, then prints a summary: requests
// sent, 201s, 4xx, 5xx, p50 and p99 latency. It stops by itself and only
// targets the URL it is given.
//
//	go run ./examples/orders/cmd/traffic -rate 50 -duration 30s -invalid 0.1
//
// It exits 1 when the API answered unexpectedly (a 5xx, an invalid request
// accepted, a valid one rejected) or did not answer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/cli"
	"github.com/oncebox/watermill-oncebox/examples/orders/internal/traffic"
)

const name = "traffic"

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := cli.NewFlagSet(name, os.Stderr)
	url := fs.String("url", "API_URL", "http://127.0.0.1:8080", "base URL of the orders API")
	rate := fs.Float64("rate", "TRAFFIC_RATE", 20, "requests per second")
	duration := fs.Duration("duration", "TRAFFIC_DURATION", 10*time.Second, "how long to send requests")
	invalid := fs.Float64("invalid", "TRAFFIC_INVALID", 0.1, "fraction of requests that are invalid on purpose, 0 to 1")
	concurrency := fs.Int("concurrency", "TRAFFIC_CONCURRENCY", 64, "most requests in flight; a request due when all are busy is skipped")
	timeout := fs.Duration("timeout", "TRAFFIC_TIMEOUT", 10*time.Second, "timeout of each request")
	seed := fs.Int("seed", "TRAFFIC_SEED", 0, "seed of the request sequence; 0: random")
	quiet := fs.Bool("quiet", "", false, "print the summary only, no progress")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return fail(cli.ExitUsage, err)
	}
	if *seed < 0 {
		return fail(cli.ExitUsage, fmt.Errorf("-seed %d: want 0 or more", *seed))
	}
	if *rate <= 0 || *duration <= 0 {
		return fail(cli.ExitUsage, fmt.Errorf("-rate %g and -duration %s: both must be more than 0", *rate, *duration))
	}
	c := traffic.Config{URL: *url, Rate: *rate, Duration: *duration, InvalidFraction: *invalid,
		Concurrency: *concurrency, Timeout: *timeout, Seed: uint64(*seed)}
	if err := c.Validate(); err != nil {
		return fail(cli.ExitUsage, err)
	}
	if !*quiet {
		c.Progress = func(s traffic.Summary) {
			fmt.Fprintf(os.Stderr, "traffic: %4.1fs sent=%d 201=%d 4xx=%d 5xx=%d errors=%d\n",
				s.Elapsed.Seconds(), s.Sent, s.Created, s.Status4xx, s.Status5xx, s.TransportErrors)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "traffic: %g requests/s for %s to %s, %g%% invalid\n", c.Rate, c.Duration, c.URL, c.InvalidFraction*100)
	s, err := traffic.Run(ctx, c)
	fmt.Printf("traffic: %s\n", s)
	if err != nil {
		return fail(cli.ExitFailure, fmt.Errorf("stopped early: %w", err))
	}
	if s.Unexpected() > 0 || s.TransportErrors > 0 {
		return fail(cli.ExitFailure, fmt.Errorf("%d unexpected answers, %d requests without an answer", s.Unexpected(), s.TransportErrors))
	}
	return 0
}

func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return code
}
