// Package traffic is the orders example's load generator: it POSTs orders
// to the API at a fixed rate for a fixed time, a fraction of them invalid
// on purpose, and summarises what came back. It is bounded by construction:
// it stops when the duration is over (waiting at most one request timeout
// for the requests in flight), and it only ever calls the base URL it is
// given.
package traffic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Limits of a run.
const (
	MaxRate        = 10_000
	MaxDuration    = time.Hour
	MaxRequests    = 1_000_000
	MaxConcurrency = 1024
)

// Config configures a run.
type Config struct {
	// URL is the API's base URL; requests go to URL + "/orders". Default
	// http://127.0.0.1:8080.
	URL string
	// Rate is the number of requests started per second. Default 20.
	Rate float64
	// Duration is how long requests are started. Default 10s.
	Duration time.Duration
	// InvalidFraction is the share of requests that are invalid on purpose
	// (and must get a 4xx), from 0 to 1. Default 0.
	InvalidFraction float64
	// Concurrency bounds the requests in flight. A request due while all
	// are busy is skipped and counted, so a slow API does not turn a fixed
	// rate into a queue. Default 64.
	Concurrency int
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// Seed makes the sequence of requests reproducible. 0: a random one.
	Seed uint64
	// Progress, if set, is called about once a second with the summary so
	// far (without latencies).
	Progress func(Summary)
}

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:8080"
	}
	if c.Rate == 0 {
		c.Rate = 20
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Concurrency == 0 {
		c.Concurrency = 64
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return c
}

// Validate reports every setting out of range, naming its flag.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("-url %q: %w", c.URL, err))
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("-url %q: want an absolute http:// or https:// URL such as http://127.0.0.1:8080", c.URL))
	case u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("-url %q: give the base URL, without query or fragment", c.URL))
	}
	if math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > MaxRate {
		errs = append(errs, fmt.Errorf("-rate %g: want more than 0 and at most %d requests per second", c.Rate, MaxRate))
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		errs = append(errs, fmt.Errorf("-duration %s: want more than 0 and at most %s", c.Duration, MaxDuration))
	}
	if n := c.Rate * c.Duration.Seconds(); n > MaxRequests {
		errs = append(errs, fmt.Errorf("-rate × -duration is %.0f requests: at most %d per run", n, MaxRequests))
	}
	if math.IsNaN(c.InvalidFraction) || c.InvalidFraction < 0 || c.InvalidFraction > 1 {
		errs = append(errs, fmt.Errorf("-invalid %g: want a fraction from 0 to 1", c.InvalidFraction))
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("-concurrency %d: want 1 to %d", c.Concurrency, MaxConcurrency))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("-timeout %s: want more than 0", c.Timeout))
	}
	return errors.Join(errs...)
}

// Summary is what a run saw.
type Summary struct {
	// Sent is the number of requests sent; Invalid of them were invalid on
	// purpose.
	Sent, Invalid int
	// Created (201), Status4xx and Status5xx count the responses; Other
	// counts any other status, TransportErrors the requests that got no
	// response (refused, timed out).
	Created, Status4xx, Status5xx, Other, TransportErrors int
	// InvalidAccepted counts invalid requests that did not get a 4xx;
	// ValidRejected counts valid requests that got a 4xx. Both are bugs.
	InvalidAccepted, ValidRejected int
	// Skipped counts requests not sent because Concurrency were in flight.
	Skipped int
	// P50, P99 and Max are latencies of the requests that got a response.
	P50, P99, Max time.Duration
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// CreatedIDs are the order ids the 201 responses returned.
	CreatedIDs []string `json:"-"`
}

// Unexpected is the number of responses that say the API misbehaved: 5xx,
// statuses that are neither 201 nor 4xx, invalid requests accepted and
// valid ones rejected.
func (s Summary) Unexpected() int {
	return s.Status5xx + s.Other + s.InvalidAccepted + s.ValidRejected
}

// String is the one-line summary.
func (s Summary) String() string {
	return fmt.Sprintf("sent=%d (invalid on purpose %d) 201=%d 4xx=%d 5xx=%d other=%d errors=%d skipped=%d unexpected=%d p50=%s p99=%s max=%s in %s",
		s.Sent, s.Invalid, s.Created, s.Status4xx, s.Status5xx, s.Other, s.TransportErrors, s.Skipped, s.Unexpected(),
		round(s.P50), round(s.P99), round(s.Max), s.Elapsed.Round(time.Millisecond))
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// Run sends the traffic and returns its summary. It stops early, with what
// it has, when ctx ends; the error is then ctx's. A configuration error is
// returned before anything is sent.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	cfg = cfg.withDefaults()
	target := strings.TrimRight(cfg.URL, "/") + "/orders"
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: cfg.Timeout,
		// Stay on the given URL: a redirect elsewhere is reported, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	r := &runner{client: client, target: target, gen: newGenerator(cfg.Seed, cfg.InvalidFraction),
		latencies: make([]time.Duration, 0, int(cfg.Rate*cfg.Duration.Seconds())+1)}
	slots := make(chan struct{}, cfg.Concurrency)
	start := time.Now()
	end := start.Add(cfg.Duration)
	nextProgress := start.Add(time.Second)
	var wg sync.WaitGroup
	var runErr error
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for i := 0; ; i++ {
		due := start.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))
		if !due.Before(end) {
			break
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				runErr = ctx.Err()
				break loop
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		if cfg.Progress != nil && time.Now().After(nextProgress) {
			nextProgress = nextProgress.Add(time.Second)
			cfg.Progress(r.snapshot(time.Since(start)))
		}
		req := r.gen.next()
		select {
		case slots <- struct{}{}:
		default:
			r.mu.Lock()
			r.sum.Skipped++
			r.mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r.send(ctx, req)
		}()
	}
	wg.Wait()
	s := r.snapshot(time.Since(start))
	r.mu.Lock()
	lat := slices.Clone(r.latencies)
	s.CreatedIDs = slices.Clone(r.sum.CreatedIDs)
	r.mu.Unlock()
	slices.Sort(lat)
	s.P50, s.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s, runErr
}

// percentile returns the q-quantile of sorted (nearest rank), 0 if empty.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

type runner struct {
	client *http.Client
	target string
	gen    *generator

	mu        sync.Mutex
	sum       Summary
	latencies []time.Duration
}

func (r *runner) snapshot(elapsed time.Duration) Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sum
	s.CreatedIDs = nil
	s.Elapsed = elapsed
	return s
}

func (r *runner) send(ctx context.Context, q request) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.target, bytes.NewReader(q.body))
	if err != nil { // cannot happen: the URL was validated
		r.record(q, 0, 0, "", err)
		return
	}
	req.Header.Set("Content-Type", q.contentType)
	t0 := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		r.record(q, 0, 0, "", err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	lat := time.Since(t0)
	if err != nil {
		r.record(q, 0, 0, "", err)
		return
	}
	id := ""
	if resp.StatusCode == http.StatusCreated {
		var o struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &o) == nil {
			id = o.ID
		}
	}
	r.record(q, resp.StatusCode, lat, id, nil)
}

func (r *runner) record(q request, status int, lat time.Duration, id string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.sum
	s.Sent++
	if q.invalid {
		s.Invalid++
	}
	if err != nil {
		s.TransportErrors++
		return
	}
	r.latencies = append(r.latencies, lat)
	switch {
	case status == http.StatusCreated:
		s.Created++
		if id != "" {
			s.CreatedIDs = append(s.CreatedIDs, id)
		}
	case status >= 400 && status < 500:
		s.Status4xx++
	case status >= 500:
		s.Status5xx++
	default:
		s.Other++
	}
	is4xx := status >= 400 && status < 500
	if q.invalid && !is4xx {
		s.InvalidAccepted++
	}
	if !q.invalid && is4xx {
		s.ValidRejected++
	}
}
