package dialecttest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/watermill-oncebox/dialects"
)

// finalizeDelete turns s into a suite of outbox.finalize: delete
// (Target.Finalize): its Dialect becomes the DeleteConfirmed copy, and a
// trigger of the test's own copies the id of each IN_PROCESS row deleted
// (with its event_type and claimed_by) into <events>_finalized. Only the
// finalize deletes IN_PROCESS rows (the
// clean-up deletes PROCESSED ones, the DLQ transfer FAILED ones), so the
// table holds exactly the rows the finalize would have marked PROCESSED:
// s.status(t, "PROCESSED") adds them, and the tests that count PROCESSED
// rows check the delete as they check the mark. The trigger is an
// observer: it writes a table nothing else reads, after the delete.
func (s *suite) finalizeDelete(t *testing.T) {
	t.Helper()
	cd, ok := s.Dialect.(dialects.ConfirmedDeleter)
	require.True(t, ok, "%s: outbox.finalize: delete needs a dialects.ConfirmedDeleter", s.Target.Name)
	s.Dialect = cd.DeleteConfirmed()
	s.deleted = true
	s.audit = s.Tables.Events + "_finalized"
	table := s.Tables.Events
	dot := strings.IndexByte(table, '.')
	schema, bare := table[:max(dot, 0)], table[dot+1:]
	name := bare + "_finalized_trg"
	if schema != "" {
		schema += "."
	}
	switch s.Target.Name {
	case "postgres":
		s.exec(t, `CREATE TABLE `+s.audit+` (id uuid NOT NULL, event_type TEXT NOT NULL, claimed_by TEXT)`)
		s.exec(t, `CREATE FUNCTION `+schema+name+`() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.status = 'IN_PROCESS' THEN INSERT INTO `+s.audit+` (id, event_type, claimed_by) VALUES (OLD.id, OLD.event_type, OLD.claimed_by); END IF;
  RETURN OLD;
END $$`)
		s.exec(t, `CREATE TRIGGER `+name+` AFTER DELETE ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+schema+name+`()`)
	case "mysql":
		s.exec(t, `CREATE TABLE `+s.audit+` (id BINARY(16) NOT NULL, event_type VARCHAR(255) NOT NULL, claimed_by VARCHAR(255))`)
		s.exec(t, `CREATE TRIGGER `+schema+name+` AFTER DELETE ON `+table+` FOR EACH ROW
BEGIN
  IF OLD.status = 'IN_PROCESS' THEN INSERT INTO `+s.audit+` (id, event_type, claimed_by) VALUES (OLD.id, OLD.event_type, OLD.claimed_by); END IF;
END`)
	case "sqlite":
		// The trigger's name takes the schema; its table and its body's
		// tables may not.
		s.exec(t, `CREATE TABLE `+s.audit+` (id BLOB NOT NULL, event_type TEXT NOT NULL, claimed_by TEXT)`)
		s.exec(t, `CREATE TRIGGER `+schema+name+` AFTER DELETE ON `+bare+` FOR EACH ROW
WHEN OLD.status = 'IN_PROCESS'
BEGIN INSERT INTO `+bare+`_finalized (id, event_type, claimed_by) VALUES (OLD.id, OLD.event_type, OLD.claimed_by); END`)
	default:
		t.Skipf("%s: no audit trigger for outbox.finalize: delete (the suite runs it on postgres, mysql and sqlite)", s.Target.Name)
	}
}

// processed counts the PROCESSED rows that match where (on the columns id,
// event_type and claimed_by), and with outbox.finalize: delete the rows
// the finalize deleted that matched it.
func (s *suite) processed(t *testing.T, where string, args ...any) int {
	t.Helper()
	n := s.Count(t, s.Tables.Events, "status = 'PROCESSED' AND "+where, args...)
	if s.deleted {
		n += s.Count(t, s.audit, where, args...)
	}
	return n
}
