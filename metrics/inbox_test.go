package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/cache"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
	"github.com/oncebox/watermill-oncebox/metrics"
	"github.com/oncebox/watermill-oncebox/middleware"
)

// brokenCache fails every operation.
type brokenCache struct{}

func (brokenCache) Contains(context.Context, string) (bool, error) {
	return false, errors.New("redis: connection refused")
}
func (brokenCache) Add(context.Context, string) error { return errors.New("redis: connection refused") }

func event(key string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(`{}`))
	if key != "" {
		msg.Metadata.Set(oncebox.HeaderEventID, key)
	}
	return msg
}

func TestInboxHooksConsumeDuplicateFailure(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	mem, err := cache.NewMemory(100, time.Hour)
	require.NoError(t, err)
	newInbox := func(c cache.Cache) *middleware.Inbox {
		cfg := middleware.InboxConfig{Dialect: s.Dialect, Namespace: "billing", Hooks: h}
		if c != nil {
			cfg.Cache = c
		}
		in, err := middleware.NewInbox(s.Beginner, cfg, nil)
		require.NoError(t, err)
		return in
	}
	runs := 0
	handler := func(msg *message.Message) ([]*message.Message, error) {
		runs++
		if string(msg.Payload) == "fail" {
			return nil, errors.New("handler failed")
		}
		return nil, nil
	}
	cached := newInbox(mem).Middleware(handler)
	uncached := newInbox(nil).Middleware(handler)
	broken := newInbox(brokenCache{}).Middleware(handler)
	key := func() string {
		id, err := oncebox.NewEventID()
		require.NoError(t, err)
		return id.String()
	}

	k1 := key()
	_, err = cached(event(k1)) // consumed
	require.NoError(t, err)
	_, err = cached(event(k1)) // duplicate, from the cache
	require.NoError(t, err)
	_, err = uncached(event(k1)) // duplicate, from the table
	require.NoError(t, err)
	bad := event(key())
	bad.Payload = []byte("fail")
	_, err = uncached(bad) // failed
	require.Error(t, err)
	_, err = uncached(event("")) // failed: no key
	require.ErrorIs(t, err, oncebox.ErrMissingEventID)
	_, err = broken(event(key())) // cache errors on lookup and add; consumed
	require.NoError(t, err)
	require.Equal(t, 3, runs)

	ns := map[string]string{"inbox_namespace": "billing"}
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_inbox_consumed_total", ns))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_inbox_duplicates_total", map[string]string{"inbox_namespace": "billing", "source": "cache"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_inbox_duplicates_total", map[string]string{"inbox_namespace": "billing", "source": "table"}))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_inbox_failed_total", ns))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_inbox_cache_lookups_total", map[string]string{"result": "hit"}))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_inbox_cache_errors_total", nil), "the failed lookup and the failed add")
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_inbox_cache_lookups_total", map[string]string{"result": "miss"}),
		"the first delivery of k1 missed the cache")
}

func TestInboxCleanerOnRun(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	h.OnCleanerRun(middleware.JobResult{Rows: 7})
	h.OnCleanerRun(middleware.JobResult{Rows: 3})
	h.OnCleanerRun(middleware.JobResult{Skipped: true})
	h.OnCleanerRun(middleware.JobResult{Err: errors.New("db down")})
	job := middleware.JobInboxCleanUp
	require.Equal(t, 10.0, mustValue(t, reg, "oncebox_job_rows_total", map[string]string{"oncebox_job": job}))
	require.Equal(t, 2.0, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": job, "result": "succeeded"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": job, "result": "skipped"}))
	require.Equal(t, 1.0, mustValue(t, reg, "oncebox_job_runs_total", map[string]string{"oncebox_job": job, "result": "failed"}))
}

func TestInboxCleanerOnRunWithARealCleaner(t *testing.T) {
	t.Parallel()
	s := pgtest.NewSchema(t)
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewInboxHooks(reg)
	require.NoError(t, err)
	old := time.Now().Add(-48 * time.Hour)
	for i := range 5 {
		_, err := s.Dialect.InboxRecord(context.Background(), s.Beginner, "", watermill.NewUUID()+string(rune('a'+i)), old)
		require.NoError(t, err)
	}
	c, err := middleware.NewInboxCleaner(s.Beginner, middleware.InboxCleanerConfig{Dialect: s.Dialect,
		Schedule: middleware.Schedule{Min: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}, OnRun: h.OnCleanerRun}, nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- c.Run(context.Background()) }()
	require.Eventually(t, func() bool {
		v, _ := value(t, reg, "oncebox_job_rows_total", map[string]string{"oncebox_job": middleware.JobInboxCleanUp})
		return v == 5
	}, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, c.Close())
	require.NoError(t, <-errc)
}
