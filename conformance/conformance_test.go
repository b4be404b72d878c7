// Package conformance_test runs the behaviour suite of oncebox
// (dialects/dialecttest) once per database with a live server of the
// machine (internal/dbtest.Targets), and Watermill's own suite
// (watermillsuite). It is a module of its own so that it can link the
// Oracle driver, which the core module does not require (docs/modules.md).
package conformance_test

import (
	"testing"

	"github.com/oncebox/watermill-oncebox/dialects/dialecttest"
	"github.com/oncebox/watermill-oncebox/internal/dbtest"
)

// TestConformance runs every test of the suite on PostgreSQL, MySQL/MariaDB
// and Oracle (skipped, each test with the reason, without ORACLE_DSN):
// TestConformance/<target>/<TestName>[/<subtest>].
func TestConformance(t *testing.T) {
	for _, tg := range dbtest.Targets() {
		t.Run(tg.Name, func(t *testing.T) {
			dialecttest.Exercise(t, tg.Suite())
		})
	}
}
