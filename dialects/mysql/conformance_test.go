package mysql_test

import (
	"testing"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestMain fails the run when a test leaves a goroutine behind (a poller,
// a cleaner, a pool not closed), as the conformance suite asks of every
// package that runs it.
func TestMain(m *testing.M) { dialecttest.VerifyTestMain(m) }

// TestConformance runs the behaviour suite of oncebox (dialecttest) on the
// mysql server of the machine: TestConformance/<TestName>[/<subtest>].
func TestConformance(t *testing.T) {
	dialecttest.Exercise(t, dbtest.TargetNamed(t, "mysql").Suite())
}

// TestConformanceFinalizeDelete runs the same suite with outbox.finalize:
// delete: a confirmed row is deleted at finalize instead of marked
// PROCESSED (dialecttest, finalizeaudit.go, says how the tests count it).
func TestConformanceFinalizeDelete(t *testing.T) {
	st := dbtest.TargetNamed(t, "mysql").Suite()
	st.Finalize = oncebox.FinalizeDelete
	dialecttest.Exercise(t, st)
}
