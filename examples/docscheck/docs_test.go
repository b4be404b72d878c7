// Package docscheck checks that the Go in the documentation compiles: every
// ```go block of README.md and docs/*.md is either a complete program, which
// this test builds against the repository's modules, or marked
// "```go fragment" (a piece of a program, shown for its shape). It lives in
// the examples module because that module requires every other one, so a
// block may import any package of the repository.
package docscheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// block is one fenced ```go block.
type block struct {
	file     string // relative to the repository's root
	line     int    // of the opening fence
	fragment bool
	code     string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// goBlocks returns the ```go blocks of text.
func goBlocks(file, text string) ([]block, error) {
	var out []block
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur *block
	var fence string
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if !strings.HasPrefix(trimmed, "```") {
				continue
			}
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			info := strings.Fields(strings.TrimPrefix(trimmed, fence))
			if len(info) > 0 && info[0] == "go" {
				cur = &block{file: file, line: n, fragment: len(info) > 1 && info[1] == "fragment"}
			} else {
				cur = &block{line: -1} // another language: skipped to its closing fence
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, "`")) == "" {
			if cur.line >= 0 {
				out = append(out, *cur)
			}
			cur = nil
			continue
		}
		if cur.line >= 0 {
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		return out, fmt.Errorf("%s:%d: a fence that is never closed", file, cur.line)
	}
	return out, sc.Err()
}

var packageClause = regexp.MustCompile(`(?m)^package \w+\s*$`)

// complete reports whether code is a Go file: its first line that is not
// a comment or blank is a package clause.
func complete(code string) bool {
	for _, l := range strings.Split(code, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "//") {
			continue
		}
		return packageClause.MatchString(t)
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.work"))
	require.NoError(t, err, "the repository's root (go.work) is two levels up from examples/docscheck")
	return root
}

func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

// build builds the complete blocks as packages of the examples module (an
// overlay: nothing is written into the tree) and returns go build's output.
func build(t *testing.T, blocks []block) (string, error) {
	t.Helper()
	module, err := filepath.Abs("..")
	require.NoError(t, err)
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	for i, b := range blocks {
		src := filepath.Join(tmp, fmt.Sprintf("block%d.go", i))
		require.NoError(t, os.WriteFile(src, []byte(fmt.Sprintf("//line %s:%d\n%s", b.file, b.line+1, b.code)), 0o600))
		dir := fmt.Sprintf("zz_docscheck/block%d", i)
		overlay[filepath.Join(module, dir, "main.go")] = src
		pkgs = append(pkgs, "./"+dir)
	}
	data, err := json.Marshal(map[string]any{"Replace": overlay})
	require.NoError(t, err)
	ov := filepath.Join(tmp, "overlay.json")
	require.NoError(t, os.WriteFile(ov, data, 0o600))
	args := append([]string{"build", "-overlay", ov}, pkgs...)
	if len(pkgs) == 1 {
		args = append([]string{"build", "-overlay", ov, "-o", os.DevNull}, pkgs...)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = module
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDocsGoBlocksCompileOrAreMarkedFragments reads README.md and
// docs/*.md: a ```go block that is not a complete program must say
// "```go fragment"; the complete ones must build.
func TestDocsGoBlocksCompileOrAreMarkedFragments(t *testing.T) {
	root := repoRoot(t)
	var programs []block
	var unmarked []string
	fragments := 0
	for _, f := range docFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		blocks, err := goBlocks(f, string(text))
		require.NoError(t, err)
		for _, b := range blocks {
			switch {
			case b.fragment:
				fragments++
			case complete(b.code):
				programs = append(programs, b)
			default:
				unmarked = append(unmarked, b.String())
			}
		}
	}
	require.Empty(t, unmarked, "```go blocks that are neither a complete program (a package clause first) nor marked ```go fragment")
	require.NotEmpty(t, programs, "the README's quick start is a complete program")
	out, err := build(t, programs)
	require.NoError(t, err, "the complete programs of the docs do not build:\n%s", out)
	t.Logf("%d complete programs built, %d fragments", len(programs), fragments)
}

// The README's usage is a complete program, with its imports.
func TestTheReadmeShowsACompleteProgram(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	blocks, err := goBlocks("README.md", string(text))
	require.NoError(t, err)
	n := 0
	for _, b := range blocks {
		if !b.fragment && complete(b.code) && strings.Contains(b.code, "\nimport (") && strings.Contains(b.code, "func main()") {
			n++
		}
	}
	require.Positive(t, n, "README.md has no complete program (package main, imports, func main)")
}

// The checks themselves: an unmarked piece is found, a marked one is not,
// and a complete program that does not compile fails the build with the
// doc's file and line.
func TestTheCheckFindsWhatItShould(t *testing.T) {
	md := "text\n```go\nx := 1\n```\n```go fragment\ny := 2\n```\n```sh\npackage main\n```\n````go\npackage main\n\nfunc main() { undefinedThing() }\n````\n"
	blocks, err := goBlocks("x.md", md)
	require.NoError(t, err)
	require.Len(t, blocks, 3)
	require.False(t, blocks[0].fragment)
	require.False(t, complete(blocks[0].code))
	require.True(t, blocks[1].fragment)
	require.True(t, complete(blocks[2].code))
	out, err := build(t, blocks[2:])
	require.Error(t, err)
	require.Contains(t, out, "x.md:14") // the line of the call in the doc
	require.Contains(t, out, "undefinedThing")

	_, err = goBlocks("y.md", "```go\npackage main\n")
	require.ErrorContains(t, err, "y.md:1")
}
