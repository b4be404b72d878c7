package sqlkit

import (
	"strings"
)

// SplitStatements splits a migration script into statements at every
// semicolon that ends a line. Scripts of PostgreSQL and MySQL are written so
// that no statement has a semicolon at the end of an inner line.
func SplitStatements(script string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") && cur.Len() == 0 {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			if s := strings.TrimSpace(cur.String()); s != ";" {
				out = append(out, strings.TrimSuffix(s, ";"))
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
