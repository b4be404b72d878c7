package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
)

// runOrdering measures the cost of per-key ordering (docs/ordering.md): one
// poller instance drains a backlog of one type whose events carry 1,000
// distinct keys, unordered (the baseline) and with ordering: key, in the
// same run; then a backlog of one key, which an ordered type relays one
// event per claim → send → finalize round trip. Tuned settings (batch
// 1000, min-fixed-delay 1ms), no-op publisher, PostgreSQL. Goal: ordered
// with 1,000 keys ≥ 0.5× unordered.
func runOrdering(ctx context.Context, e *env) ([]row, error) {
	defer e.dropSchema()
	n := e.n(100_000, 2_000)
	nOne := e.n(5_000, 200)
	ordered := tunedSettings
	ordered.Ordering = oncebox.OrderingKey
	unordered200, ordered200 := tunedSettings, ordered
	unordered200.BatchSize, ordered200.BatchSize = oncebox.DefaultBatchSize, oncebox.DefaultBatchSize
	cases := []relayCase{
		{name: "unordered, 1,000 keys, 1 instance, batch 1000", n: n, baseline: true, drain: drainPollers(1, tunedSettings)},
		{name: "ordering: key, 1,000 keys, 1 instance, batch 1000", n: n, drain: drainPollers(1, ordered),
			note: "every batch holds one event of each key: no batch can be claimed while one is in flight"},
		{name: "unordered, 1,000 keys, 1 instance, batch 200", n: n, drain: drainPollers(1, unordered200)},
		{name: "ordering: key, 1,000 keys, 1 instance, batch 200", n: n, drain: drainPollers(1, ordered200),
			note: "up to MaxBatchesInFlight batches of distinct keys in flight"},
		{name: "ordering: key, 1 key, 1 instance", n: nOne, drain: drainPollers(1, ordered),
			note: "a publisher that does not keep a key's order within a call: one event per claim, send and finalize"},
		{name: "ordering: key, 1 key, 1 instance, publisher keeps key order", n: nOne, drain: drainPollersWith(1, ordered, true),
			note: "a poller.KeyOrderKeeper (the kafka package's publisher): a batch carries up to batch-size events of the key, in order"},
	}
	keys := []int{1000, 1000, 1000, 1000, 1, 1}
	rows := make([]row, 0, len(cases))
	for i, c := range cases {
		r := keyedRelayDB(e.pgRelayDB(), keys[i])
		got, err := measureRelays(ctx, "ordering", r, []relayCase{c})
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	rows = withRatios(rows)
	// The batch-200 pair against itself too: same run, same batch size.
	if rows[2].Value > 0 {
		rows[3].Note += fmt.Sprintf("; %.2f× unordered at batch 200", rows[3].Value/rows[2].Value)
	}
	verdict := "met"
	if rows[1].Ratio < 0.5 {
		verdict = "NOT met"
	}
	rows[1].Note += fmt.Sprintf("; goal ≥ 0.5× unordered: %s (%.2f×)", verdict, rows[1].Ratio)
	return rows, nil
}

// keyedRelayDB is r whose fresh schema gives every inserted event one of
// keys keys, round robin, through a trigger: the relay scenarios' backlog
// writer, unchanged, then writes keyed events.
func keyedRelayDB(r *relayDB, keys int) *relayDB {
	k := *r
	k.fresh = func(ctx context.Context) (dialects.Dialect, error) {
		d, err := r.fresh(ctx)
		if err != nil {
			return nil, err
		}
		events := d.Tables().Events
		schema := events[:strings.LastIndexByte(events, '.')+1]
		for _, q := range []string{
			"CREATE SEQUENCE " + schema + "bench_key_seq",
			`CREATE FUNCTION ` + schema + `bench_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.partition_key := 'key-' || (nextval('` + schema + `bench_key_seq') % ` + fmt.Sprint(keys) + `);
  RETURN NEW;
END $$`,
			"CREATE TRIGGER bench_key BEFORE INSERT ON " + events + " FOR EACH ROW EXECUTE FUNCTION " + schema + "bench_key()",
		} {
			if _, err := r.db.ExecContext(ctx, q); err != nil {
				return nil, fmt.Errorf("keyed backlog: %w", err)
			}
		}
		return d, nil
	}
	return &k
}
