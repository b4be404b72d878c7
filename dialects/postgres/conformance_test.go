package postgres_test

import (
	"testing"

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
