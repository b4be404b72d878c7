package traffic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/examples/orders/internal/api"
)

// fakeAPI answers like the orders API, using its validation, without a
// database.
func fakeAPI(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var created atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/orders" {
			http.NotFound(w, r)
			return
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return
		}
		_, _, problems, err := api.DecodeOrder(r.Body)
		if err != nil || len(problems) > 0 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"id": fmt.Sprintf("o-%d", created.Add(1))})
	}))
	t.Cleanup(hs.Close)
	return hs, &created
}

func TestRunSendsAtTheRateAndEveryInvalidRequestIsRejected(t *testing.T) {
	hs, created := fakeAPI(t)
	progress := 0
	start := time.Now()
	s, err := Run(context.Background(), Config{URL: hs.URL, Rate: 200, Duration: 1500 * time.Millisecond,
		InvalidFraction: 0.3, Seed: 7, Progress: func(Summary) { progress++ }})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 3*time.Second, "the run must end by itself")
	require.Equal(t, 300, s.Sent+s.Skipped)
	require.Zero(t, s.TransportErrors)
	require.Zero(t, s.Unexpected(), "%s", s)
	require.Greater(t, s.Invalid, 50)
	require.Equal(t, s.Invalid, s.Status4xx)
	require.Equal(t, s.Sent-s.Invalid, s.Created)
	require.Len(t, s.CreatedIDs, s.Created)
	require.Equal(t, int64(s.Created), created.Load())
	require.Positive(t, s.P50)
	require.LessOrEqual(t, s.P50, s.P99)
	require.LessOrEqual(t, s.P99, s.Max)
	require.GreaterOrEqual(t, progress, 1)
}

func TestEveryKindOfInvalidRequestIsRefusedByTheAPI(t *testing.T) {
	g := newGenerator(1, 1)
	for i, kind := range invalidKinds {
		r := kind(g)
		if r.contentType != "" && r.contentType != "application/json" {
			continue // refused for its content type
		}
		_, _, problems, err := api.DecodeOrder(bytesReader(r.body))
		require.True(t, err != nil || len(problems) > 0, "invalid kind %d is accepted: %s", i, r.body)
	}
	for range 100 {
		r := newGenerator(2, 0).next()
		_, _, problems, err := api.DecodeOrder(bytesReader(r.body))
		require.NoError(t, err)
		require.Empty(t, problems, "%s", r.body)
	}
}

func TestRunCountsServerErrorsAndUnreachableAPIs(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer hs.Close()
	s, err := Run(context.Background(), Config{URL: hs.URL, Rate: 50, Duration: 200 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, s.Sent, s.Status5xx)
	require.Equal(t, s.Sent, s.Unexpected())

	hs.Close()
	s, err = Run(context.Background(), Config{URL: hs.URL, Rate: 50, Duration: 200 * time.Millisecond, Timeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, s.Sent, s.TransportErrors)
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	hs, _ := fakeAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Config{URL: hs.URL, Rate: 10, Duration: time.Minute})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		flag string
	}{
		{Config{URL: "ftp://x"}, "-url"},
		{Config{URL: "127.0.0.1:8080"}, "-url"},
		{Config{URL: "http://x/?a=b"}, "-url"},
		{Config{Rate: -1}, "-rate"},
		{Config{Rate: MaxRate + 1}, "-rate"},
		{Config{Duration: -time.Second}, "-duration"},
		{Config{Duration: 2 * MaxDuration}, "-duration"},
		{Config{Rate: MaxRate, Duration: MaxDuration}, "-rate × -duration"},
		{Config{InvalidFraction: 1.5}, "-invalid"},
		{Config{Concurrency: -2}, "-concurrency"},
		{Config{Timeout: -time.Second}, "-timeout"},
	} {
		err := c.cfg.Validate()
		require.Error(t, err, "%+v", c.cfg)
		require.Contains(t, err.Error(), c.flag)
	}
	require.NoError(t, Config{}.Validate())
}

func TestPercentile(t *testing.T) {
	require.Zero(t, percentile(nil, 0.5))
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, percentile(d, 0.5))
	require.Equal(t, 99*time.Millisecond, percentile(d, 0.99))
	require.Equal(t, 100*time.Millisecond, percentile(d, 1))
	require.Equal(t, 1*time.Millisecond, percentile(d[:1], 0.99))
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
