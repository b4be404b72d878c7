package oncebox

// ---- outbox.finalize (issue 28, item 2) -----------------------------------

// Finalize modes of OutboxConfig.Finalize: what the relay does with a row
// once the broker confirmed its event.
const (
	// FinalizeMark marks the row PROCESSED; the clean-up job deletes it
	// after outbox.clean-up.ttl. The default: the PROCESSED rows are the
	// outbox's history (the console's "processed in the last 5 minutes" and
	// an event's "delivered", oncebox status), and a row written twice more
	// per event is what it costs.
	FinalizeMark = "mark"
	// FinalizeDelete deletes the row at once, under the same claim-token
	// guard as the mark (a row recovered and claimed again by another
	// instance meanwhile is left alone): one row version and its WAL fewer
	// per event, and no clean-up work, but no history of delivered events
	// in the table (docs/postgresql.md, "Writes per event").
	FinalizeDelete = "delete"
)

func validateFinalize(path, mode string) error {
	switch mode {
	case FinalizeMark, FinalizeDelete:
		return nil
	}
	return fieldErr(path, "must be %q or %q, got %q", FinalizeMark, FinalizeDelete, mode)
}
