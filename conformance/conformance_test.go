// Package conformance_test runs the behaviour suite of oncebox
// (dialects/dialecttest) on the databases whose driver the core module does
// not require (Oracle: go-ora), and Watermill's own suite (watermillsuite).
// It is a module of its own so that it can link the Oracle driver
// (docs/modules.md). The other databases' packages run the suite in the
// core module's tests (dialects/postgres, dialects/mysql:
// TestConformance/<TestName>).
package conformance_test

import (
	"testing"

	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestConformance runs every test of the suite on each database whose
// package cannot run it (Oracle; skipped, each test with the reason,
// without ORACLE_DSN): TestConformance/<target>/<TestName>[/<subtest>].
func TestConformance(t *testing.T) {
	for _, tg := range dbtest.Targets() {
		if tg.InPackage {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			dialecttest.Exercise(t, tg.Suite())
		})
	}
}
