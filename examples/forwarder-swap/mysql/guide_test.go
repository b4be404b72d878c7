package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGuideShowsTheExampleCode keeps docs/migrating-from-forwarder.md
// honest: every Go block that names this program's main.go on its first
// line must be a verbatim excerpt of it, and the YAML block that names
// oncebox.yaml must be that file. The program and its tests then vouch for
// what the guide shows.
func TestGuideShowsTheExampleCode(t *testing.T) {
	guide, err := os.ReadFile("../../../docs/migrating-from-forwarder.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	yaml, err := os.ReadFile("oncebox.yaml")
	require.NoError(t, err)

	blocks := regexp.MustCompile("(?s)```go(?: fragment)?\n// examples/forwarder-swap/mysql/main.go\n(.*?)```").FindAllSubmatch(guide, -1)
	require.GreaterOrEqual(t, len(blocks), 4, "the guide's excerpts of main.go")
	for _, b := range blocks {
		for _, part := range strings.Split(string(b[1]), "\n\n") {
			require.Contains(t, string(src), strings.TrimRight(part, "\n"), "the guide shows code that is not in main.go")
		}
	}

	y := regexp.MustCompile("(?s)```yaml\n# examples/forwarder-swap/mysql/oncebox.yaml\n(.*?)```").FindSubmatch(guide)
	require.NotNil(t, y, "the guide shows oncebox.yaml")
	require.Equal(t, strings.TrimRight(string(yaml), "\n"), strings.TrimRight(string(y[1]), "\n"))
}
