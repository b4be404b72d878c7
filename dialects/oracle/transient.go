package oracle

import (
	"strings"
)

// transientCodes are the ORA- errors a later try may not meet: deadlock,
// resource busy, end-of-file on the channel, not connected, no listener,
// connect timeout, initialisation or shutdown in progress, TNS could not
// resolve / lost contact.
var transientCodes = []string{
	"ORA-00060", "ORA-00054", "ORA-03113", "ORA-03114", "ORA-03135",
	"ORA-12541", "ORA-12170", "ORA-12514", "ORA-12537", "ORA-12547",
	"ORA-01033", "ORA-01034", "ORA-01089",
}

// IsTransient reports the Oracle errors a later try may not meet, by their
// ORA- code in go-ora's message. The errors every database shares are
// dialects.IsTransient's.
func IsTransient(err error) bool {
	msg := err.Error()
	for _, code := range transientCodes {
		if strings.Contains(msg, code) {
			return true
		}
	}
	return false
}

// isDeadlock reports whether err says the transaction was chosen as a
// deadlock victim (ORA-00060): it changed nothing and is run again.
func isDeadlock(err error) bool { return strings.Contains(err.Error(), "ORA-00060") }
