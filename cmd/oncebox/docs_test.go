package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	oncebox "github.com/oncebox/watermill-oncebox"
	"github.com/oncebox/watermill-oncebox/internal/pgtest"
)

// docExample is one command of a ```console block of docs/cli.md and the
// output the docs show for it.
type docExample struct {
	line    int
	command string // without "$ oncebox "
	output  []string
}

// consoleExamples reads the `$ oncebox …` commands of the console blocks
// of the markdown file at path.
func consoleExamples(t *testing.T, path string) []docExample {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []docExample
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "```console"):
			in = true
		case strings.HasPrefix(l, "```"):
			in = false
		case !in:
		case strings.HasPrefix(l, "$ oncebox "):
			out = append(out, docExample{line: i + 1, command: strings.TrimPrefix(l, "$ oncebox ")})
		case strings.HasPrefix(l, "$ "):
			out = append(out, docExample{line: i + 1}) // another program's: not checked
		case len(out) > 0:
			out[len(out)-1].output = append(out[len(out)-1].output, strings.TrimRight(l, " "))
		}
	}
	return out
}

// matchElided reports whether got holds want, where a line "…" of want
// stands for any number of lines of got: the pieces between them appear in
// got in order, the first at its start and the last at its end unless an
// "…" is there.
func matchElided(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	var pieces [][]string
	cur := []string{}
	for _, l := range want {
		if l == "…" {
			pieces = append(pieces, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, l)
	}
	pieces = append(pieces, cur)
	at := 0
	for i, p := range pieces {
		if len(p) == 0 {
			continue
		}
		found := -1
		for j := at; j+len(p) <= len(got); j++ {
			if i == 0 && j > 0 {
				break // the first piece starts the output
			}
			if equalLines(got[j:j+len(p)], p) {
				found = j
				if i < len(pieces)-1 {
					break
				}
			}
		}
		if found < 0 || (i == len(pieces)-1 && found+len(p) != len(got)) {
			return false
		}
		at = found + len(p)
	}
	return true
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDocsExamplesAreTheCLIsOutput runs the commands that docs/cli.md shows
// with their output, on the fixtures the golden tests use, and checks the
// docs show what the CLI prints (a line "…" stands for lines left out).
func TestDocsExamplesAreTheCLIsOutput(t *testing.T) {
	t.Parallel()
	// The migrate examples run in order on one empty schema, the dry run's
	// on another, the DLQ's on TestDLQListAndShow's rows.
	migrated := &cli{t: t, schema: pgtest.NewEmptySchema(t)}
	dry := &cli{t: t, schema: pgtest.NewEmptySchema(t)}
	rows := newCLI(t)
	rows.insert(seed{n: 1}, seed{n: 2, source: oncebox.DLQSourceConsumer, eventType: "invoice-sent"},
		seed{n: 3, status: oncebox.DLQStatusToRetry}, seed{n: 4})
	noDB := &cli{t: t}
	status, err := os.ReadFile(filepath.Join("testdata", "status.txt"))
	require.NoError(t, err)

	shown := func(r result, echo bool) string {
		out := r.stdout + r.stderr
		if echo {
			out += fmt.Sprintln(r.code)
		}
		return out
	}
	runners := map[string]func(args []string, echo bool) string{
		"migrate":  func(args []string, echo bool) string { return shown(migrated.run("", args...), echo) },
		"dry":      func(args []string, echo bool) string { return shown(dry.run("", args...), echo) },
		"dlq":      func(args []string, echo bool) string { return shown(rows.run("", args...), echo) },
		"noDB":     func(args []string, echo bool) string { return shown(noDB.runArgs("", args...), echo) },
		"status":   func([]string, bool) string { return string(status) },
		"unproved": nil,
	}
	// runnerOf picks the fixture of a command of the docs.
	runnerOf := func(args []string) string {
		cmd := strings.Join(args, " ")
		switch {
		case strings.Contains(cmd, "--print-sql"), strings.HasPrefix(cmd, "dlq lst"), strings.HasPrefix(cmd, "admin srve"):
			return "noDB"
		case strings.Contains(cmd, "--dry-run"):
			return "dry"
		case strings.Contains(cmd, "migrate"):
			return "migrate"
		case cmd == "status":
			return "status"
		case strings.HasPrefix(cmd, "dlq list"), strings.HasPrefix(cmd, "dlq show"):
			return "dlq"
		}
		// version (the build's), dlq retry/resolve/delete on rows of
		// their own, admin serve: shown, not run.
		return "unproved"
	}
	checked := 0
	for _, ex := range consoleExamples(t, filepath.Join("..", "..", "docs", "cli.md")) {
		if ex.command == "" {
			continue
		}
		cmd, echo := strings.CutSuffix(ex.command, "; echo $?")
		args := strings.Fields(cmd)
		run := runners[runnerOf(args)]
		if run == nil {
			continue
		}
		var got []string
		if out := run(args, echo); out != "" {
			got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		}
		for i := range got {
			got[i] = strings.TrimRight(got[i], " ")
		}
		want := ex.output
		for len(want) > 0 && want[len(want)-1] == "" {
			want = want[:len(want)-1]
		}
		require.True(t, matchElided(want, got), "docs/cli.md:%d: `oncebox %s` shows\n%s\nthe CLI prints\n%s",
			ex.line, ex.command, strings.Join(want, "\n"), strings.Join(got, "\n"))
		checked++
	}
	require.GreaterOrEqual(t, checked, 10, "the docs' examples checked")
}

func TestMatchElided(t *testing.T) {
	t.Parallel()
	got := []string{"a", "b", "c", "d"}
	for want, ok := range map[string]bool{
		"a b c d": true, "a … d": true, "… c d": true, "a b …": true, "… b …": true,
		"a c": false, "b … d": false, "a … c": false, "a b c": false, "a … e": false, "": false,
	} {
		w := strings.Fields(want)
		require.Equal(t, ok, matchElided(w, got), want)
	}
}
