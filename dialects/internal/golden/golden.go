// Package golden holds what the database packages' golden tests share: the
// comparison with testdata/, the named statements they render and the
// statements every database's DLQ store builds. It is imported by tests
// only.
package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/internal/sqlkit"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Check compares got with testdata/name, or rewrites it with -update.
func Check(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update in this package to create %s", path)
	require.Equal(t, string(want), got)
}

// Query is one statement of a golden file, under its name. It is an
// unnamed struct type, so that the tests' literals can stay positional.
type Query = struct {
	Name string
	Q    dialects.Query
}

// At is the time every golden statement is built at.
var At = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Render writes each query and its arguments, as the golden files hold
// them.
func Render(qs []Query) string {
	var b strings.Builder
	for _, c := range qs {
		fmt.Fprintf(&b, "-- %s\n%s;\n-- args: %v\n\n", c.Name, c.Q.SQL, c.Q.Args)
	}
	return b.String()
}

// CountDollarParams returns the highest $n of sql.
func CountDollarParams(sql string) int {
	high := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] != '$' {
			continue
		}
		n := 0
		for j := i + 1; j < len(sql) && sql[j] >= '0' && sql[j] <= '9'; j++ {
			n = n*10 + int(sql[j]-'0')
		}
		high = max(high, n)
	}
	return high
}

// DLQStore is the DLQ store's statements of one database, built by its
// unexported builders through the XxxSQL shims of its export_test.go.
type DLQStore interface {
	DLQGetSQL(id oncebox.EventID) dialects.Query
	DLQGetStatusSQL(id oncebox.EventID) dialects.Query
	DLQListSQL(f dialects.DLQFilter, after *dialects.DLQKey, limit int) dialects.Query
	DLQCountSQL(f dialects.DLQFilter) dialects.Query
	DLQSetStatusSQL(id oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	DLQSetStatusManySQL(ids []oncebox.EventID, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	DLQSetStatusWhereSQL(f dialects.DLQFilter, to oncebox.DLQStatus, from []oncebox.DLQStatus, now time.Time) dialects.Query
	DLQDeleteSQL(id oncebox.EventID) dialects.Query
	DLQDeleteManySQL(ids []oncebox.EventID) dialects.Query
	DLQDeleteWhereSQL(f dialects.DLQFilter) dialects.Query
}

// DLQStoreQueries is every DLQ store statement of d, in the order and with
// the arguments of the golden files of every database.
func DLQStoreQueries(d DLQStore) []Query {
	at := At
	id1, id2 := oncebox.EventID{0x01}, oncebox.EventID{0x02}
	full := dialects.DLQFilter{
		Statuses:  []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved},
		EventType: "order-created", Source: oncebox.DLQSourceConsumer,
		MovedFrom: at.Add(-time.Hour), MovedTo: at,
	}
	from := []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved}
	return []Query{
		{"DLQGet", d.DLQGetSQL(id1)},
		{"DLQGetStatus", d.DLQGetStatusSQL(id1)},
		{"DLQList (no filter, first page)", d.DLQListSQL(dialects.DLQFilter{}, nil, 51)},
		{"DLQList (every filter, after a key)", d.DLQListSQL(full, &dialects.DLQKey{MovedAt: at, ID: id1}, 51)},
		{"DLQCount (no filter)", d.DLQCountSQL(dialects.DLQFilter{})},
		{"DLQCount (every filter)", d.DLQCountSQL(full)},
		{"DLQSetStatus", d.DLQSetStatusSQL(id1, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusMany", d.DLQSetStatusManySQL([]oncebox.EventID{id1, id2}, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusWhere (no filter)", d.DLQSetStatusWhereSQL(dialects.DLQFilter{}, oncebox.DLQStatusToRetry, from, at)},
		{"DLQSetStatusWhere (every filter)", d.DLQSetStatusWhereSQL(full, oncebox.DLQStatusToRetry, from, at)},
		{"DLQDelete", d.DLQDeleteSQL(id1)},
		{"DLQDeleteMany", d.DLQDeleteManySQL([]oncebox.EventID{id1, id2})},
		{"DLQDeleteWhere (no filter)", d.DLQDeleteWhereSQL(dialects.DLQFilter{})},
		{"DLQDeleteWhere (every filter)", d.DLQDeleteWhereSQL(full)},
	}
}

// ConsoleQueries builds every statement of a dialect's console reads that
// runs through sqlkit.Console (the error class computed in Go): the
// fingerprint view's keyset page unfiltered and with every filter after
// an id, a fingerprint's act's page from the first and after an id.
func ConsoleQueries(s sqlkit.ConsoleStatements) []Query {
	id := oncebox.EventID{0x01}
	all := dialects.DLQFilter{Statuses: []oncebox.DLQStatus{oncebox.DLQStatusMoved, oncebox.DLQStatusResolved},
		EventType: "a", Source: oncebox.DLQSourcePublisher, MovedFrom: At.Add(-time.Hour), MovedTo: At}
	moved := []oncebox.DLQStatus{oncebox.DLQStatusMoved}
	return []Query{
		{"ConsoleTypes", s.Types(At, At.Add(-5*time.Minute))},
		{"ConsoleInstances: heartbeats", s.Heartbeats()},
		{"ConsoleInstances: claims", s.Claims()},
		{"ConsoleFingerprints: first page, no filter", s.Errors(dialects.DLQFilter{}, nil, sqlkit.ConsolePageRows)},
		{"ConsoleFingerprints: a page after an id, every filter", s.Errors(all, &id, sqlkit.ConsolePageRows)},
		{"ConsoleFingerprintIDs: first page", s.GroupErrors(oncebox.DLQSourcePublisher, "a", moved, nil, 100)},
		{"ConsoleFingerprintIDs: a page after an id", s.GroupErrors(oncebox.DLQSourceConsumer, "a", moved, &id, 100)},
		{"ConsoleOutboxEvent", s.OutboxEvent(id)},
	}
}
