package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

// runWithStdin runs the CLI on the schema of c with stdin as given and the
// default terminal check (env.interactive unset).
func runWithStdin(c *cli, stdin *os.File, args ...string) result {
	c.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--dsn", pgtest.DSN(), "--schema", c.schema.Name}, args...)
	code := runEnv(env{args: full, stdin: stdin, stdout: &out, stderr: &errOut,
		getenv: func(string) string { return "" }})
	return result{code: code, stdout: out.String(), stderr: c.mask(errOut.String())}
}

// TestFilterRefusedWhenStdinIsNotATerminal: /dev/null (a character device)
// and a pipe are not terminals, so a filter without --yes is refused with
// exit 2 before any question is asked, and nothing changes.
func TestFilterRefusedWhenStdinIsNotATerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2})

	devNull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devNull.Close()
	r := runWithStdin(c, devNull, "dlq", "delete", "--all")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.NotContains(t, r.stderr, "type yes")
	golden(t, "error_filter_needs_yes.txt", r.stderr) // the same refusal as any non-terminal

	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pr.Close()
	_, err = pw.WriteString("yes\n")
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	r = runWithStdin(c, pr, "dlq", "resolve", "--event-type", "order-created")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.NotContains(t, r.stderr, "type yes")
	require.Equal(t, 2, c.countDLQ())
	require.Equal(t, "MOVED", c.dlqStatus(1))
}

// TestFilterPromptsOnATerminal gives the CLI a real pseudo-terminal as
// stdin: it asks, and goes on with the answer yes.
func TestFilterPromptsOnATerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.insert(seed{n: 1}, seed{n: 2})
	master, slave := openPTY(t)
	_, err := master.WriteString("yes\n")
	require.NoError(t, err)
	r := runWithStdin(c, slave, "dlq", "delete", "--all")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "2 rows match; type yes to continue: ", r.stderr)
	require.Equal(t, "2 of 2 rows deleted\n", r.stdout)
	require.Equal(t, 0, c.countDLQ())
}

// openPTY opens a pseudo-terminal pair (Linux /dev/ptmx), closed at the
// end of the test.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	fd := int(m.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0), "unlockpt")
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err, "ptsname")
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return m, s
}
