package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEventTypeFilterMustBeText: an --event-type that is not valid UTF-8
// is a usage error naming the field, not a database error.
func TestEventTypeFilterMustBeText(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	r := c.run("", "dlq", "list", "--event-type", "order\xff")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Equal(t, "oncebox: --event-type: is not valid UTF-8\n", r.stderr)
}
