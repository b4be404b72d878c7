package dialecttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// The console's reads (dialects.ConsoleInspector), the same on every
// database that has them: the overview's line per type (counts, the
// oldest due row, PROCESSED since a time), the relay instances with their
// claims, the DLQ's fingerprints (dialects.ErrorClass: on PostgreSQL the
// stored column, which must class as the Go function does), a
// fingerprint's ids page by page, an outbox row's state.
func testConsoleInspector(t *testing.T, tg Target) {
	s := setup(t, tg)
	ci, ok := s.Dialect.(dialects.ConsoleInspector)
	if !ok {
		// Oracle's are not written yet (docs/console.md says so): a skip
		// that names it. Any other dialect without them fails: a console
		// showing the counts alone must not go unnoticed.
		if s.Dialect.Name() == "oracle" {
			t.Skip("the oracle dialect has no console statements yet: its console shows the counts and lists alone (docs/console.md)")
		}
		t.Fatalf("the %s dialect does not implement dialects.ConsoleInspector (docs/console.md)", s.Dialect.Name())
	}
	ctx := context.Background()
	a := s.publish(t, s.clock, "a", 3)
	b := s.publish(t, s.clock, "b", 1)
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'IN_PROCESS', claimed_by = "+s.P(1)+", claimed_at = "+s.P(2)+" WHERE id = "+s.P(3),
		"relay-1", t0.Add(time.Second), s.ID(a[0]))
	s.exec(t, "UPDATE "+s.Tables.Events+" SET status = 'PROCESSED', updated_at = "+s.P(1)+" WHERE id = "+s.P(2), t0, s.ID(a[1]))
	s.exec(t, "UPDATE "+s.Tables.Events+" SET next_retry_at = "+s.P(1)+", retry_count = 1 WHERE id = "+s.P(2), t0.Add(time.Hour), s.ID(b[0]))
	s.exec(t, "INSERT INTO "+s.Tables.Instances+" (instance_id, heartbeat_at) VALUES ("+s.P(1)+", "+s.P(2)+")", "relay-2", t0)

	types, err := ci.ConsoleTypes(ctx, s.Beginner, t0.Add(time.Minute), t0.Add(-time.Minute))
	require.NoError(t, err)
	require.Len(t, types, 2)
	require.Equal(t, "a", types[0].EventType)
	require.Equal(t, [4]int64{1, 1, 0, 1}, [4]int64{types[0].Pending, types[0].InProcess, types[0].Failed, types[0].Processed})
	require.NotNil(t, types[0].OldestDue)
	require.True(t, types[0].OldestDue.Equal(t0), "oldest due: %s", types[0].OldestDue)
	require.Equal(t, "b", types[1].EventType)
	require.Equal(t, int64(1), types[1].Pending)
	require.Nil(t, types[1].OldestDue, "b's only row waits for its retry: none due")
	types, err = ci.ConsoleTypes(ctx, s.Beginner, t0.Add(time.Minute), t0.Add(time.Second))
	require.NoError(t, err)
	require.Zero(t, types[0].Processed, "processed before the window")

	instances, err := ci.ConsoleInstances(ctx, s.Beginner)
	require.NoError(t, err)
	require.Len(t, instances, 2, "relay-1 holds a claim without a heartbeat, relay-2 a heartbeat without claims")
	require.Equal(t, "relay-1", instances[0].ID)
	require.Nil(t, instances[0].HeartbeatAt)
	require.Equal(t, int64(1), instances[0].Claims)
	require.True(t, instances[0].OldestClaim.Equal(t0.Add(time.Second)), "oldest claim: %v", instances[0].OldestClaim)
	require.Equal(t, "relay-2", instances[1].ID)
	require.True(t, instances[1].HeartbeatAt.Equal(t0))
	require.Zero(t, instances[1].Claims)
	require.Nil(t, instances[1].OldestClaim)

	errs := []string{
		`order 42 "abc": row 01a24612-b59c-745e-960b-48b239c6003c locked at 0xDEAD`,
		`order 7 'x y': row 01a24612-0000-745e-960b-48b239c6003d locked at 0x1F`,
		`order 1234 "": row 01A24612-B59C-745E-960B-48B239C6003E locked at 0Xff`,
		"other: ünïcödé 12 \"q\" ' and a lone quote",
	}
	var group []oncebox.EventID
	for i, e := range errs {
		// The group's moved_at run against its ids: its newest row (errs[2],
		// the sample) is not the one moved last (errs[0]).
		id := s.insertDLQ(t, dlqRow{err: e, movedAt: t0.Add(time.Duration(3-i) * time.Minute)})
		if i < 3 {
			group = append(group, id)
		}
	}
	s.insertDLQ(t, dlqRow{err: errs[0], status: oncebox.DLQStatusResolved})
	class := dialects.ErrorClass(errs[0])
	require.Equal(t, `order N ?: row <id> locked at <hex>`, class)
	fps, err := ci.ConsoleFingerprints(ctx, s.Beginner, dialects.DLQFilter{}, 10)
	require.NoError(t, err)
	require.Len(t, fps, 3)
	require.Equal(t, dialects.ConsoleFingerprint{ConsoleGroup: dialects.ConsoleGroup{Source: oncebox.DLQSourcePublisher,
		EventType: "order-created", ErrorClass: class}, Status: oncebox.DLQStatusMoved, Count: 3,
		LastMovedAt: fps[0].LastMovedAt, SampleError: fps[0].SampleError}, fps[0])
	require.True(t, fps[0].LastMovedAt.Equal(t0.Add(3*time.Minute)), "latest moved_at: %s", fps[0].LastMovedAt)
	require.Equal(t, errs[2], fps[0].SampleError, "the sample is the group's newest row's (largest id)")
	classes := map[string]bool{}
	for _, fp := range fps {
		classes[fp.ErrorClass+"/"+string(fp.Status)] = true
	}
	require.Equal(t, map[string]bool{class + "/MOVED": true, class + "/RESOLVED": true,
		dialects.ErrorClass(errs[3]) + "/MOVED": true}, classes, "the database classes as dialects.ErrorClass does")
	fps, err = ci.ConsoleFingerprints(ctx, s.Beginner, dialects.DLQFilter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusResolved}}, 10)
	require.NoError(t, err)
	require.Len(t, fps, 1)
	require.Equal(t, int64(1), fps[0].Count)
	fps, err = ci.ConsoleFingerprints(ctx, s.Beginner, dialects.DLQFilter{}, 1)
	require.NoError(t, err)
	require.Len(t, fps, 1, "limit")

	g := dialects.ConsoleGroup{Source: oncebox.DLQSourcePublisher, EventType: "order-created", ErrorClass: class}
	moved := []oncebox.DLQStatus{oncebox.DLQStatusMoved}
	var got []oncebox.EventID
	var after *oncebox.EventID
	for page := 0; ; page++ {
		require.Less(t, page, 5, "the pages end")
		ids, err := ci.ConsoleFingerprintIDs(ctx, s.Beginner, g, moved, after, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(ids), 2)
		got = append(got, ids...)
		if len(ids) < 2 {
			break
		}
		after = &ids[len(ids)-1]
	}
	require.ElementsMatch(t, group, got, "the group's MOVED rows, each once, and no other")
	for i := 1; i < len(got); i++ {
		require.Less(t, string(got[i-1][:]), string(got[i][:]), "id order")
	}

	e, found, err := ci.ConsoleOutboxEvent(ctx, s.Beginner, a[0])
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, oncebox.StatusInProcess, e.Status)
	require.True(t, e.CreatedAt.Equal(t0), "created_at: %s", e.CreatedAt)
	_, found, err = ci.ConsoleOutboxEvent(ctx, s.Beginner, newID(t))
	require.NoError(t, err)
	require.False(t, found)
}
