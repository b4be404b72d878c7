package postgres_test

import (
	"testing"
	"time"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/postgres"

	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestMain fails the run when a test leaves a goroutine behind (a poller,
// a cleaner, a pool not closed), as the conformance suite asks of every
// package that runs it.
func TestMain(m *testing.M) { dialecttest.VerifyTestMain(m) }

// TestConformance runs the behaviour suite of oncebox (dialecttest) on the
// postgres server of the machine: TestConformance/<TestName>[/<subtest>].
func TestConformance(t *testing.T) {
	dialecttest.Exercise(t, dbtest.TargetNamed(t, "postgres").Suite())
}

// TestConformancePartitioned runs the same suite on an outbox table
// partitioned by time (outbox.partitions, migration step 1001): every
// behaviour must hold on it as on the plain table.
func TestConformancePartitioned(t *testing.T) {
	st := dbtest.TargetNamed(t, "postgres").Suite()
	newEmpty := st.NewEmpty
	st.NewEmpty = func(t testing.TB) *dialecttest.Env {
		e := newEmpty(t)
		e.Dialect = e.Dialect.(*postgres.Dialect).WithPartitions(oncebox.PartitionsConfig{Interval: time.Hour, Ahead: 3})
		return e
	}
	dialecttest.Exercise(t, st)
}

// TestConformanceFinalizeDelete runs the same suite with outbox.finalize:
// delete: a confirmed row is deleted at finalize instead of marked
// PROCESSED (dialecttest, finalizeaudit.go, says how the tests count it).
func TestConformanceFinalizeDelete(t *testing.T) {
	st := dbtest.TargetNamed(t, "postgres").Suite()
	st.Finalize = oncebox.FinalizeDelete
	dialecttest.Exercise(t, st)
}
