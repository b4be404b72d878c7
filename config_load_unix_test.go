//go:build unix

package oncebox_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// makeFIFO makes a named pipe that nobody writes to: opening it for
// reading blocks until a writer comes.
func makeFIFO(t *testing.T) (string, bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	return path, true
}
