package dialecttest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/poller"
)

// Four pollers race over the same rows on the real clock: every event is
// delivered exactly once (no double claim, no lost row). The heartbeat
// timeout is an hour: a live instance's batch is sent again when its
// heartbeat lapses past it (at least once, by design), which a machine at
// load 55 did once on SQLite with the 12s default; this test is about the
// claims.
func testClaimFourPollersDeliverEveryEventOnce(t *testing.T, tg Target) {
	s := setup(t, tg)
	const total = 8_000
	ids := s.publish(t, nil, "order-created", total)
	rec := newRecorder()
	for i := range 4 {
		cfg := fastPolling(s.pollerConfig("order-created"))
		cfg.InstanceID = fmt.Sprintf("instance-%d", i)
		cfg.HeartbeatTimeout = time.Hour
		s.startPoller(t, nil, rec, cfg)
	}
	eventually(t, "every event delivered", func() bool { return rec.delivered() == total })
	eventually(t, "every row PROCESSED", func() bool { return s.status(t, "PROCESSED") == total })
	for _, id := range ids {
		require.Len(t, rec.of(id), 1, "event %s delivered once", id)
	}
}

// Concurrent claimers get disjoint batches; the claim respects the due time
// and the event type, and returns what the relay needs.
func testClaim(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()

	t.Run("concurrent claimers take disjoint batches", func(t *testing.T) {
		ids := s.publish(t, s.clock, "race", 600)
		var mu sync.Mutex
		got := map[oncebox.EventID]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "race", Limit: 25, Token: newID(t), Now: t0})
					if err != nil {
						t.Error(err)
						return
					}
					if len(evs) == 0 {
						return
					}
					require.LessOrEqual(t, len(evs), 25)
					mu.Lock()
					for _, e := range evs {
						got[e.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, got, len(ids))
		for _, id := range ids {
			require.Equal(t, 1, got[id], "claimed once: %s", id)
		}
		require.Equal(t, 600, s.Count(t, s.Tables.Events, "event_type = "+s.P(1)+" AND status = "+s.P(2), "race", "IN_PROCESS"))
	})

	t.Run("due time, event type and the returned columns", func(t *testing.T) {
		ids := s.publish(t, s.clock, "due", 3)
		other := s.publish(t, s.clock, "other-type", 2)
		s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 2 WHERE id = "+s.P(2),
			t0.Add(time.Minute), s.ID(ids[2]))
		evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "due", Limit: 10, Token: newID(t), Now: t0})
		require.NoError(t, err)
		require.ElementsMatch(t, ids[:2], claimedIDs(evs), "the row due in a minute waits; other types are not taken")
		e := evs[0]
		require.Equal(t, "due", e.Topic)
		require.NotNil(t, e.Key)
		require.Equal(t, "k", *e.Key)
		require.Equal(t, []byte(`{"n":1}`), e.Payload)
		require.JSONEq(t, `{"oncebox_key":"k"}`, string(e.Metadata),
			"the stored metadata leaves the event id and type out: the relay sends them from the columns")
		require.NotEmpty(t, e.MessageUUID)
		require.Zero(t, e.RetryCount)

		evs, err = s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "due", Limit: 10, Token: newID(t), Now: t0.Add(time.Minute - time.Microsecond)})
		require.NoError(t, err)
		require.Empty(t, evs)
		evs, err = s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "due", Limit: 10, Token: newID(t), Now: t0.Add(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, ids[2:], claimedIDs(evs), "due at its time")
		require.Equal(t, 2, evs[0].RetryCount)
		require.Equal(t, 2, s.Count(t, s.Tables.Events, "event_type = "+s.P(1)+" AND status = "+s.P(2), "other-type", "PENDING"))

		evs, err = s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "other-type", Limit: 1, Token: newID(t), Now: t0})
		require.NoError(t, err)
		require.Len(t, evs, 1, "the limit")
		require.Contains(t, other, evs[0].ID)
	})
}

// The recovery takes at most its limit, and only claims older than the
// cutoff.
func testRecoveryLimitAndCutoff(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	s.publish(t, s.clock, "recover", 5)
	old, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "recover", Limit: 3, Token: newID(t), Now: t0})
	require.NoError(t, err)
	require.Len(t, old, 3)
	_, err = s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "recover", Limit: 2, Token: newID(t), Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	cutoff := t0.Add(time.Minute)
	n, err := s.recoverClaimedBefore(ctx, cutoff, t0.Add(2*time.Hour), 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "the limit")
	n, err = s.recoverClaimedBefore(ctx, cutoff, t0.Add(2*time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the claim made after the cutoff stays")
	require.Equal(t, 3, s.Count(t, s.Tables.Events, "event_type = 'recover' AND status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL"))
}

// recoverClaimedBefore returns up to limit rows claimed before cutoff to
// PENDING, as of now: the recovery by max-batch-processing-time alone,
// RecoverStale with both of its bounds at cutoff (then a claim's
// instance and heartbeat change nothing). It returns the rows recovered.
func (s *suite) recoverClaimedBefore(ctx context.Context, cutoff, now time.Time, limit int) (int64, error) {
	n, _, _, err := s.Dialect.RecoverStale(ctx, s.Beginner, dialects.RecoverParams{Now: now, ClaimedBefore: cutoff,
		StaleBefore: cutoff, Limit: limit})
	return int64(n), err
}

func claimedIDs(evs []dialects.ClaimedEvent) []oncebox.EventID {
	out := make([]oncebox.EventID, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// A claim never finalized (an instance died mid-batch) is returned to
// PENDING by the recovery after max-batch-processing-time, without counting
// an attempt; the dead claimer's late finalizes (processed, failed, release)
// change nothing once another claim holds the rows.
func testFinalizeGuardAfterRecovery(t *testing.T, tg Target) {
	s := setup(t, tg)
	ctx := context.Background()
	ids := s.publish(t, s.clock, "order-created", 4)
	claim := func(token oncebox.EventID, now time.Time) []dialects.ClaimedEvent {
		evs, err := s.Dialect.Claim(ctx, s.Beginner, dialects.ClaimParams{EventType: "order-created", Limit: 10, Token: token, Now: now})
		require.NoError(t, err)
		return evs
	}
	recoverAt := func(now time.Time) int64 {
		n, err := s.recoverClaimedBefore(ctx, now.Add(-300*time.Second), now, 1000)
		require.NoError(t, err)
		return n
	}
	stale, fresh := newID(t), newID(t)
	require.Len(t, claim(stale, t0), 4)
	require.Empty(t, claim(newID(t), t0), "claimed rows are not claimed again")

	require.Zero(t, recoverAt(t0.Add(299*time.Second)), "not before max-batch-processing-time")
	require.Equal(t, int64(4), recoverAt(t0.Add(301*time.Second)), "the crashed claim is recovered")
	require.Equal(t, 4, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0"), "no attempt counted")
	now := t0.Add(302 * time.Second)
	require.Len(t, claim(fresh, now), 4)

	// The dead claimer wakes up: every finalize with its token is refused.
	marked, err := s.Dialect.MarkProcessed(ctx, s.Beginner, stale, ids, now)
	require.NoError(t, err)
	require.Empty(t, marked)
	failed := make([]dialects.FailedEvent, len(ids))
	for i, id := range ids {
		failed[i] = dialects.FailedEvent{ID: id, Status: oncebox.StatusFailed, RetryCount: 4, NextRetryAt: now, Error: "late"}
	}
	n, err := s.Dialect.MarkFailed(ctx, s.Beginner, stale, failed, now)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = s.Dialect.ReleaseClaims(ctx, s.Beginner, stale, ids, now)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 4, s.status(t, "IN_PROCESS"), "the live claim is untouched")

	// The live claim finalizes each way.
	marked, err = s.Dialect.MarkProcessed(ctx, s.Beginner, fresh, ids[:2], now)
	require.NoError(t, err)
	require.ElementsMatch(t, ids[:2], marked)
	retryAt := now.Add(10 * time.Second)
	n, err = s.Dialect.MarkFailed(ctx, s.Beginner, fresh, []dialects.FailedEvent{
		{ID: ids[2], Status: oncebox.StatusPending, RetryCount: 1, NextRetryAt: retryAt, Error: "broker said no"},
	}, now)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	n, err = s.Dialect.ReleaseClaims(ctx, s.Beginner, fresh, ids[3:], now)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, 2, s.status(t, "PROCESSED"))
	require.Equal(t, 1, s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND status = 'PENDING' AND retry_count = 1 AND next_retry_at = "+s.P(2)+
		" AND last_error = "+s.P(3), s.ID(ids[2]), retryAt, "broker said no"))
	require.Equal(t, 1, s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL",
		s.ID(ids[3])), "released without an attempt")

	require.Equal(t, ids[3:], claimedIDs(claim(newID(t), now)), "the released row is due at once, the failed one waits")
	require.Equal(t, ids[2:3], claimedIDs(claim(newID(t), retryAt)), "the failed row at its retry time")

	// A second finalize of the same claim changes nothing, and reports
	// nothing as marked (Dialect.MarkProcessed returns the ids it marked).
	marked, err = s.Dialect.MarkProcessed(ctx, s.Beginner, fresh, ids, retryAt)
	require.NoError(t, err)
	require.Equal(t, 2, s.status(t, "PROCESSED"))
	require.Equal(t, 2, s.status(t, "IN_PROCESS"), "rows of later claims are untouched")
	if s.deleted {
		require.Equal(t, 2, s.Count(t, s.audit, "1 = 1"), "not deleted again")
	} else {
		require.Equal(t, 2, s.Count(t, s.Tables.Events, "status = 'PROCESSED' AND updated_at = "+s.P(1), now), "not marked again")
	}
	require.Empty(t, marked, "a repeated finalize reports no row as marked: the rows were PROCESSED by the first one")
}

// Through the poller: instance A claims and hangs (as if dead); B recovers
// the rows after max-batch-processing-time on the fake clock and delivers
// them; A's late failure report is a stale finalize that changes nothing.
func testCrashedPollerIsRecoveredWithoutAttempt(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 5)

	claimed := make(chan struct{})
	unblock := make(chan struct{})
	hung := newRecorder()
	hung.fn = func(string, []*message.Message) error {
		close(claimed)
		<-unblock
		return errors.New("the broker rejected the message") // the late outcome of a dead instance
	}
	hA := &hooks{}
	cfgA := s.pollerConfig("order-created")
	cfgA.InstanceID, cfgA.Hooks = "A", hA
	s.startPoller(t, nil, hung, cfgA)
	<-claimed
	require.Equal(t, 5, s.status(t, "IN_PROCESS"))

	rec := newRecorder()
	hB := &hooks{}
	cfgB := s.pollerConfig("order-created")
	cfgB.InstanceID, cfgB.Hooks = "B", hB
	s.startPoller(t, nil, rec, cfgB)
	// Waiting on the clock: A's recovery and clean-up (its poll loop
	// hangs), B's poll loop, recovery and clean-up.
	spent := stepUntil(t, s.clock, 5, time.Second, 20*time.Minute, func() bool { return rec.delivered() == 5 })
	require.GreaterOrEqual(t, spent, 300*time.Second, "not recovered before max-batch-processing-time")
	eventually(t, "B marks the rows PROCESSED", func() bool { return s.status(t, "PROCESSED") == 5 })
	_, _, recovered := runs(t, poller.JobRecovery, hA, hB)
	require.Equal(t, 5, recovered)

	close(unblock)
	eventually(t, "A's finalize is seen as stale", func() bool { return len(hA.Snapshot().Stale) == 1 })
	require.Equal(t, [2]int{5, 0}, hA.Snapshot().Stale[0])
	require.Equal(t, 5, s.status(t, "PROCESSED"))
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"), "recovery counts no attempt")
	for _, id := range ids {
		require.Len(t, rec.of(id), 1)
	}
}

// A failing send backs off 10s, 30s, 90s, then the row is FAILED and moved
// to the DLQ with its history.
func testRetryScheduleThenFailedThenDLQ(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 1)
	var mu sync.Mutex
	var attempts []time.Time
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		mu.Lock()
		attempts = append(attempts, s.clock.Now())
		mu.Unlock()
		return errors.New("schema registry says no")
	}
	h := &hooks{}
	cfg := s.pollerConfig("order-created")
	cfg.Hooks = h
	cfg.Oncebox.Outbox.DLQ.Enabled = true
	s.startPoller(t, nil, rec, cfg)
	stepUntil(t, s.clock, waitersPerPollerDLQ, 250*time.Millisecond, 10*time.Minute, func() bool { return s.Count(t, s.Tables.DLQ, "") == 1 })

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 4, "max-retries 3 means 4 attempts")
	failures := h.Snapshot().Failures
	require.Len(t, failures, 4)
	for k, want := range []time.Duration{10 * time.Second, 30 * time.Second, 90 * time.Second} {
		f := failures[k]
		require.Equal(t, k+1, f.Attempt)
		require.False(t, f.Final)
		require.Equal(t, want, f.NextRetryAt.Sub(attempts[k]), "retry %d waits exactly %s", k+1, want)
		require.False(t, attempts[k+1].Before(f.NextRetryAt), "attempt %d not before its retry time", k+2)
	}
	require.True(t, failures[3].Final)
	require.Zero(t, s.Count(t, s.Tables.Events, ""), "gone from the outbox")
	var eventID oncebox.EventID
	var source, status, lastErr string
	var retries int
	require.NoError(t, s.DB.QueryRowContext(context.Background(),
		"SELECT event_id, source, status, retry_count, last_error FROM "+s.Tables.DLQ).Scan(&eventID, &source, &status, &retries, &lastErr))
	require.Equal(t, ids[0], eventID)
	require.Equal(t, "publisher", source)
	require.Equal(t, "MOVED", status)
	require.Equal(t, 4, retries)
	require.Equal(t, "schema registry says no", lastErr)
}

// batchRecorder implements poller.BatchPublisher: it rejects messages whose
// payload is "poison".
type batchRecorder struct{ *recorder }

func (b batchRecorder) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var ok []*message.Message
	for i, m := range msgs {
		if string(m.Payload) == "poison" {
			errs[i] = errors.New("record too large")
			continue
		}
		ok = append(ok, m)
	}
	return errs, b.recorder.Publish(topic, ok...)
}

// One rejected message of a batch fails alone: the others are PROCESSED in
// the same finalize.
func testBatchPublisherFailsOnlyTheRejectedMessages(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 4)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET payload = "+s.P(1)+" WHERE id = "+s.P(2), []byte("poison"), s.ID(ids[1]))
	h := &hooks{}
	cfg := s.pollerConfig("order-created")
	cfg.Hooks = h
	s.startPoller(t, nil, batchRecorder{newRecorder()}, cfg)
	eventually(t, "the three good ones PROCESSED", func() bool { return s.status(t, "PROCESSED") == 3 })
	eventually(t, "the poison one failed once", func() bool {
		return s.Count(t, s.Tables.Events, "id = "+s.P(1)+" AND status = 'PENDING' AND retry_count = 1 AND last_error = "+s.P(2),
			s.ID(ids[1]), "record too large") == 1
	})
	eventually(t, "one failure reported", func() bool { return len(h.Snapshot().Failures) == 1 })
}

// unavailableMidBatch confirms the first message of each call and loses the
// connection under the others.
// With wholeCall it also fails the call.
type unavailableMidBatch struct {
	*recorder
	wholeCall bool
}

func (u unavailableMidBatch) PublishBatch(topic string, msgs ...*message.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	lost := fmt.Errorf("connection reset: %w", oncebox.ErrBrokerUnavailable)
	for i := 1; i < len(msgs); i++ {
		errs[i] = lost
	}
	if err := u.recorder.Publish(topic, msgs[0]); err != nil {
		return nil, err
	}
	if u.wholeCall {
		return errs, lost
	}
	return errs, nil
}

// A broker lost mid-batch: the confirmed message is PROCESSED, the others are
// released without an attempt.
func testConnectionLostMidBatchCountsNoAttempt(t *testing.T, tg Target) {
	s := setup(t, tg)
	for _, wholeCall := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole call %v", wholeCall), func(t *testing.T) {
			typ := fmt.Sprintf("lost-%v", wholeCall)
			s.publish(t, s.clock, typ, 3)
			h := &hooks{}
			cfg := s.pollerConfig(typ)
			cfg.Hooks = h
			s.startPoller(t, nil, unavailableMidBatch{newRecorder(), wholeCall}, cfg)
			require.NoError(t, s.clock.BlockUntilContext(context.Background(), waitersPerPoller))
			eventually(t, "one PROCESSED", func() bool {
				return s.processed(t, "event_type = "+s.P(1), typ) == 1
			})
			require.Equal(t, 2, s.Count(t, s.Tables.Events, "event_type = "+s.P(1)+" AND status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL", typ),
				"the others are released without an attempt")
			require.Empty(t, h.Snapshot().Failures)
			require.Equal(t, 1, h.Snapshot().Unavailable)
		})
	}
}

// A long broker outage burns no attempts: the rows stay PENDING and are
// sent once it is back.
func testBrokerOutageBurnsNoAttempts(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "order-created", 3)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		if down.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:9092: %w", oncebox.ErrBrokerUnavailable)
		}
		return nil
	}
	h := &hooks{}
	cfg := s.pollerConfig("order-created")
	cfg.Hooks = h
	s.startPoller(t, nil, rec, cfg)
	stepUntil(t, s.clock, waitersPerPoller, 250*time.Millisecond, 10*time.Minute, func() bool { return h.Snapshot().Unavailable >= 8 })
	require.Equal(t, 3, s.status(t, "PENDING"))
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"))
	require.Empty(t, h.Snapshot().Failures)
	polls := h.Snapshot().Polls
	require.Greater(t, polls[len(polls)-1].NextDelay, polls[0].NextDelay, "the type backs off while the broker is down")

	down.Store(false)
	stepUntil(t, s.clock, waitersPerPoller, time.Second, 5*time.Minute, func() bool { return rec.delivered() == 3 })
	eventually(t, "PROCESSED", func() bool { return s.status(t, "PROCESSED") == 3 })
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"))
}

// A close that times out mid-send releases the batch without an attempt.
func testCloseTimeoutReleasesTheBatchWithoutAnAttempt(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "order-created", 3)
	inFlight := make(chan struct{})
	rec := newRecorder()
	rec.fn = func(_ string, msgs []*message.Message) error {
		close(inFlight)
		<-msgs[0].Context().Done() // a publisher that honours the context
		return msgs[0].Context().Err()
	}
	cfg := s.pollerConfig("order-created")
	cfg.CloseTimeout = 50 * time.Millisecond
	p, err := poller.New(s.Beginner, rec, s.cfg(cfg), nil)
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- p.Run(context.Background()) }()
	<-inFlight
	require.NoError(t, p.Close())
	require.NoError(t, <-errc)
	require.Equal(t, 3, s.Count(t, s.Tables.Events, "status = 'PENDING' AND retry_count = 0 AND claim_token IS NULL"))
}

// A slow event type never holds up another. The slow type's first claim
// may take fewer than its 10 rows: SKIP LOCKED passes over a row another
// claim holds for an instant (on MySQL, the fast type's range scan locks
// the first index entry past its range, a slow row, while it checks it),
// and a partial batch in flight holds the loop's next claim. So the test
// waits for a slow send to begin and checks that the rows of the sends
// begun stay IN_PROCESS, none delivered, while every fast event goes.
func testSlowTypeNeverBlocksAnother(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, nil, "slow", 10)
	fastIDs := s.publish(t, nil, "fast", 300)
	release := make(chan struct{})
	rec := newRecorder()
	var slowRows, slowSends atomic.Int64 // of the slow sends begun
	rec.fn = func(topic string, msgs []*message.Message) error {
		if topic == "slow" {
			slowRows.Add(int64(len(msgs)))
			slowSends.Add(1)
			<-release
		}
		return nil
	}
	cfg := fastPolling(s.pollerConfig("slow", "fast"))
	cfg.Oncebox.Outbox.Defaults.BatchSize = 50
	s.startPoller(t, nil, rec, cfg)
	defer close(release)
	slowInProcess := func() int {
		return s.Count(t, s.Tables.Events, "event_type = 'slow' AND status = 'IN_PROCESS'")
	}
	defer func() {
		if t.Failed() {
			t.Logf("slow: %d PENDING, %d IN_PROCESS, %d sends begun with %d rows; fast: %d PENDING",
				s.Count(t, s.Tables.Events, "event_type = 'slow' AND status = 'PENDING'"), slowInProcess(),
				slowSends.Load(), slowRows.Load(), s.Count(t, s.Tables.Events, "event_type = 'fast' AND status = 'PENDING'"))
		}
	}()
	eventually(t, "slow hangs with its batch", func() bool { return slowSends.Load() > 0 })
	eventually(t, "every fast event delivered while slow hangs", func() bool {
		for _, id := range fastIDs {
			if len(rec.of(id)) != 1 {
				return false
			}
		}
		return true
	})
	require.Equal(t, int64(1), slowSends.Load(), "one slow batch in flight: the next waits for it")
	require.Equal(t, int(slowRows.Load()), slowInProcess(), "the hanging batch's rows stay IN_PROCESS")
	require.Zero(t, s.processed(t, "event_type = 'slow'"))
	require.Equal(t, 10, s.Count(t, s.Tables.Events, "event_type = 'slow' AND status IN ('PENDING', 'IN_PROCESS')"))
}

// probingRecorder is a recorder that can be probed, like the rabbitmq
// publisher: while down, both the sends and the probes fail.
type probingRecorder struct {
	*recorder
	down   *atomic.Bool
	probes atomic.Int64
}

func (p *probingRecorder) ProbeBroker(context.Context) error {
	p.probes.Add(1)
	if p.down.Load() {
		return fmt.Errorf("dial tcp 127.0.0.1:5672: %w", oncebox.ErrBrokerUnavailable)
	}
	return nil
}

// An outage is one ERROR line and one metric change per event type, not one
// per released batch; with a publisher that can be probed, it costs one
// claim: the type probes the broker, without touching its rows, until it
// answers, then delivers everything. (Before, every poll claimed and
// released a batch and logged an ERROR line.)
func testBrokerOutageIsLoggedOnceAndProbedWithoutClaiming(t *testing.T, tg Target) {
	s := setup(t, tg)
	s.publish(t, s.clock, "order-created", 3)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder()
	rec.fn = func(string, []*message.Message) error {
		if down.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:5672: %w", oncebox.ErrBrokerUnavailable)
		}
		return nil
	}
	pub := &probingRecorder{recorder: rec, down: &down}
	h := &outageHooks{}
	cfg := s.pollerConfig("order-created")
	cfg.Hooks = h
	logger := watermill.NewCaptureLogger()
	s.startPollerLogged(t, nil, pub, cfg, logger)

	stepUntil(t, s.clock, waitersPerPoller, 250*time.Millisecond, 20*time.Minute, func() bool { return pub.probes.Load() >= 20 })
	require.Equal(t, 1, h.Snapshot().Unavailable, "one batch claimed and released, then only probes")
	require.Equal(t, 3, s.status(t, "PENDING"))
	require.Equal(t, []bool{true}, h.changes(), "one outage reported")
	lines := 0
	for _, m := range logger.Captured()[watermill.ErrorLogLevel] {
		if strings.Contains(m.Msg, "Broker unavailable") {
			lines++
		}
	}
	require.Equal(t, 1, lines, "one ERROR line for the whole outage")

	down.Store(false)
	stepUntil(t, s.clock, waitersPerPoller, time.Second, 5*time.Minute, func() bool { return rec.delivered() == 3 })
	eventually(t, "PROCESSED", func() bool { return s.status(t, "PROCESSED") == 3 })
	require.Equal(t, []bool{true, false}, h.changes(), "the end of the outage is reported once")
	require.Zero(t, s.Count(t, s.Tables.Events, "retry_count <> 0"))
}

// outageHooks records the outage changes a poller reports.
type outageHooks struct {
	hooks
	mu   sync.Mutex
	seen []bool
}

func (h *outageHooks) BrokerOutage(_ string, down bool, _ error) {
	h.mu.Lock()
	h.seen = append(h.seen, down)
	h.mu.Unlock()
}

func (h *outageHooks) changes() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.seen...)
}

// The claim takes due rows in (next_retry_at, id) order. Rows that share
// next_retry_at (one multi-row publish) used to come in the table's physical
// order: here they are written in descending id order, and each batch must
// still hold the lowest ids first (on PostgreSQL the first batch was the
// highest 100 ids before the claim ordered by id).
func testClaimOrdersByNextRetryAtThenID(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := make([]oncebox.EventID, 300)
	for i := range ids {
		ids[i] = newID(t)
	}
	rows := make([]dialects.EventRow, len(ids))
	for i := range rows {
		id := ids[len(ids)-1-i] // physical order: highest id first
		rows[i] = dialects.EventRow{ID: id, EventType: "order-created", Topic: "orders",
			MessageUUID: id.String(), Payload: []byte("{}"), Metadata: "{}", CreatedAt: t0}
	}
	require.NoError(t, s.Dialect.InsertEvents(context.Background(), s.Beginner, rows))
	var got []oncebox.EventID
	for range 3 {
		claimed, err := s.Dialect.Claim(context.Background(), s.Beginner, dialects.ClaimParams{
			EventType: "order-created", Limit: 100, Token: newID(t), Now: t0.Add(time.Second)})
		require.NoError(t, err)
		require.Len(t, claimed, 100)
		batch := claimedIDs(claimed)
		sort.Slice(batch, func(i, j int) bool { return string(batch[i][:]) < string(batch[j][:]) })
		got = append(got, batch...)
	}
	require.Equal(t, ids, got, "batch k holds ids 100k to 100k+99 in creation order")
}

// A full batch is claimed again at once: a backlog drains without waiting
// min-fixed-delay between full batches (the fake clock never moves here).
// The article's rule waited min-fixed-delay after each, so a backlog
// drained at batch-size per min-fixed-delay: 800 rows/s with the defaults.
func testFullBatchIsClaimedAgainAtOnce(t *testing.T, tg Target) {
	s := setup(t, tg)
	ids := s.publish(t, s.clock, "order-created", 1000)
	rec := newRecorder()
	cfg := s.pollerConfig("order-created")
	cfg.Oncebox.Outbox.Defaults.BatchSize = 100
	s.startPoller(t, nil, rec, cfg)
	eventually(t, "the backlog drained without the clock moving", func() bool { return rec.delivered() == len(ids) })
}
