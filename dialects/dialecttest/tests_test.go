package dialecttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestMain checks that the package's own tests leave no goroutine, the
// way a package that calls Exercise checks the suite's.
func TestMain(m *testing.M) { VerifyTestMain(m) }

// TestEveryTestIsListed fails when a test of the suite (a func testXxx(t
// *testing.T, tg Target) of the package's files) is missing from tests, is
// listed twice, or is listed under a name other than its TestXxx: a test
// moved here but not listed would never run, silently.
func TestEveryTestIsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	declared := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isTestName(fn.Name.Name) {
				continue
			}
			declared[fn.Name.Name] = true
		}
	}
	require.NotEmpty(t, declared)

	listed := map[string]bool{}
	for _, c := range tests {
		require.Falsef(t, listed[c.name], "%s is listed twice", c.name)
		listed[c.name] = true
		fn := "t" + strings.TrimPrefix(c.name, "T")
		require.Truef(t, declared[fn], "%s is listed but no func %s is declared", c.name, fn)
	}
	for fn := range declared {
		require.Truef(t, listed["T"+strings.TrimPrefix(fn, "t")], "func %s is not listed in tests: Exercise never runs it", fn)
	}
	require.Len(t, listed, len(declared))
}

// isTestName reports whether name is testXxx, Xxx starting with an upper
// case letter.
func isTestName(name string) bool {
	rest, ok := strings.CutPrefix(name, "test")
	return ok && rest != "" && unicode.IsUpper([]rune(rest)[0])
}
