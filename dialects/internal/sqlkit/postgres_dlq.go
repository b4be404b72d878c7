package sqlkit

import (
	"strings"
)

// WhereClause joins conds into a WHERE clause, "" when there are none.
func WhereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return "\n WHERE " + strings.Join(conds, "\n   AND ")
}
