package oncebox_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/stretchr/testify/require"
)

// databasePackages returns the directories whose code may write and run
// SQL: each database package of the registry (dialects/<name>, as
// dialects/api_test.go reads them too) and their shared machinery.
func databasePackages() []string {
	out := []string{"dialects/internal/"}
	for _, db := range registry.All() {
		out = append(out, "dialects/"+db.Name+"/")
	}
	return out
}

// sqlAllowed are the places outside the database packages where SQL text
// stays, each for a reason. A path ending in "/" is a directory; match,
// when set, must be part of the offending text. An entry that matches
// nothing fails the test too, so that the list only shrinks.
var sqlAllowed = []struct{ path, match, why string }{
	{"dialects/dialecttest/", "",
		"the conformance suite: test code (imported by tests only) that arranges rows and reads them back with statements of its own, to test what the dialects do"},
	{"internal/dbtest/", "",
		"test support (imported by tests only): makes and drops each test's schema, database or table prefix on the live servers"},
	{"internal/pgtest/", "",
		"test support (imported by tests only): makes and drops each PostgreSQL test's schema and counts its rows"},
	{"internal/soak/", "",
		"the soak harness (imported by e2e/postgres's test and the bench only): samples PostgreSQL's own statistics (pg_relation_size, pg_stat_database) and counts what is left, which no dialect method reads"},
}

// sqlStatement matches the start of a statement: a string literal, or a
// concatenation of literals and other operands ("?" in the text), that
// begins like one. Anchored at the start, so that prose which mentions a
// statement ("oncebox: listener: LISTEN …") is not one.
var sqlStatement = regexp.MustCompile(`(?is)^[\s(]*(` +
	`select\s.*\bfrom\s|select\s+[\w.]+\s*\(|` +
	`insert\s+(ignore\s+)?into\s|update\s+\S+\s+set\s|delete\s+from\s|merge\s+into\s|` +
	`(create|drop|alter|truncate)\s+(or\s+replace\s+)?(unique\s+)?(schema|database|table|index|user|view|trigger|function|procedure|sequence)\b|` +
	`with\s+\w+\s+as\s*\(|(begin|declare)\s.*\bend;|` +
	`(listen|unlisten|notify)\s|((rollback\s+to|release)\s+)?savepoint\s|` +
	`set\s+(@|session\b|local\b|transaction\b)|do\s+\w+\s*\(` +
	`)`)

// sqlRunners are the methods that run a statement, on database/sql, pgx
// and watermill-sql's handles.
var sqlRunners = map[string]bool{
	"ExecContext": true, "QueryContext": true, "QueryRowContext": true, "PrepareContext": true,
	"Exec": true, "Query": true, "QueryRow": true, "Prepare": true,
}

// TestNoSQLOutsideTheDatabasePackages: every statement is written and run
// by a database package (dialects/postgres, dialects/mysql, …, with
// dialects/internal); the packages that use them
// call the dialect's methods, which take a handle and return typed
// results. It reads every non-test Go file of the core module elsewhere
// and fails on SQL text in a string literal (or a concatenation that
// starts with one) and on a call that runs SQL text or a statement's SQL
// (…SQL) on a handle, or that carries a statement (dialects.Query) to run
// it elsewhere, naming each file:line, except where sqlAllowed says why.
func TestNoSQLOutsideTheDatabasePackages(t *testing.T) {
	t.Parallel()
	own := databasePackages()
	used := make([]bool, len(sqlAllowed))
	var found []string
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		slash := filepath.ToSlash(path)
		if e.IsDir() {
			if path == "." {
				return nil
			}
			if strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" || inDatabasePackage(own, slash+"/") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module of the workspace
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, v := range sqlIn(t, path) {
			if i := allowed(slash, v.text); i >= 0 {
				used[i] = true
				continue
			}
			found = append(found, fmt.Sprintf("%s:%d: %s: %q", slash, v.line, v.what, cut(v.text)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Errorf("SQL outside the database packages (%s): write the statement in each database package and call the dialect's method instead, "+
			"or add an entry to sqlAllowed saying why it stays:\n%s", strings.Join(own, ", "), strings.Join(found, "\n"))
	}
	for i, a := range sqlAllowed {
		if !used[i] {
			t.Errorf("sqlAllowed: %s (%q) matches nothing any more: remove the entry", a.path, a.match)
		}
	}
}

func inDatabasePackage(own []string, dir string) bool {
	for _, p := range own {
		if strings.HasPrefix(dir, p) {
			return true
		}
	}
	return false
}

// allowed returns the index of the entry of sqlAllowed that covers text in
// the file path, or -1.
func allowed(path, text string) int {
	for i, a := range sqlAllowed {
		if (path == a.path || strings.HasSuffix(a.path, "/") && strings.HasPrefix(path, a.path)) && strings.Contains(text, a.match) {
			return i
		}
	}
	return -1
}

// cut shortens text for the failure message.
func cut(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if len(text) > 80 {
		return text[:80] + "…"
	}
	return text
}

// sqlUse is one place that writes or runs SQL.
type sqlUse struct {
	line int
	what string
	text string
}

// sqlIn returns the places of the Go file path that write or run SQL.
func sqlIn(t *testing.T, path string) []sqlUse {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []sqlUse
	seen := map[ast.Node]bool{} // literals and concatenations read as part of a longer one
	check := func(n ast.Node, text string) {
		if sqlStatement.MatchString(text) {
			out = append(out, sqlUse{fset.Position(n.Pos()).Line, "SQL text", text})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.ADD || seen[n] {
				return true
			}
			if text, ok := concatenation(n, seen); ok {
				check(n, text)
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING && !seen[n] {
				if s, err := strconv.Unquote(n.Value); err == nil {
					check(n, s)
				}
			}
		case *ast.SelectorExpr:
			// A statement built by a dialect and carried elsewhere to be
			// run there: the dialect's methods run their own.
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "dialects" && n.Sel.Name == "Query" {
				out = append(out, sqlUse{fset.Position(n.Pos()).Line, "a statement (dialects.Query) outside the database packages", "dialects.Query"})
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !sqlRunners[sel.Sel.Name] {
				return true
			}
			for _, arg := range n.Args {
				if text, ok := runsSQL(arg, seen); ok {
					out = append(out, sqlUse{fset.Position(n.Pos()).Line, sel.Sel.Name + " runs SQL", text})
				}
			}
		}
		return true
	})
	return out
}

// concatenation returns the text of a chain of + whose operands include a
// string literal, "?" standing for each other operand, and marks the
// chain's parts as seen.
func concatenation(e *ast.BinaryExpr, seen map[ast.Node]bool) (string, bool) {
	var parts []string
	lit := false
	var walk func(x ast.Expr)
	walk = func(x ast.Expr) {
		switch x := x.(type) {
		case *ast.BinaryExpr:
			if x.Op == token.ADD {
				seen[x] = true
				walk(x.X)
				walk(x.Y)
				return
			}
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				if s, err := strconv.Unquote(x.Value); err == nil {
					seen[x] = true
					lit = true
					parts = append(parts, s)
					return
				}
			}
		case *ast.ParenExpr:
			walk(x.X)
			return
		}
		parts = append(parts, "?")
	}
	walk(e)
	return strings.Join(parts, ""), lit
}

// runsSQL reports whether arg, an argument of a call that runs a
// statement, is SQL: text (a string literal or a concatenation with one),
// or a statement's SQL by its name (q.SQL, dialects.NotifyQueueUsageSQL).
func runsSQL(arg ast.Expr, seen map[ast.Node]bool) (string, bool) {
	switch a := arg.(type) {
	case *ast.BasicLit:
		if a.Kind == token.STRING {
			seen[a] = true
			return a.Value, true
		}
	case *ast.BinaryExpr:
		if a.Op == token.ADD {
			return concatenation(a, seen)
		}
	case *ast.SelectorExpr:
		if strings.HasSuffix(a.Sel.Name, "SQL") {
			return exprText(a), true
		}
	case *ast.Ident:
		if strings.HasSuffix(a.Name, "SQL") {
			return a.Name, true
		}
	}
	return "", false
}

// exprText writes a selector as the source does.
func exprText(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprText(e.X) + "." + e.Sel.Name
	case *ast.CallExpr:
		return exprText(e.Fun) + "()"
	}
	return "…"
}

// TestOnlyTheRegistryImportsADatabasePackage guards the layout of issue 22:
// the core reaches a database package (dialects/<name>) only through
// dialects/registry, so that adding a database is its folder and the
// registry's line. Test files, and the PostgreSQL test support
// (internal/pgtest, imported by tests only; internal/soak, by a test and
// the bench), may import one.
func TestOnlyTheRegistryImportsADatabasePackage(t *testing.T) {
	t.Parallel()
	const module = "github.com/oncebox/watermill-oncebox/"
	own := databasePackages()
	var found []string
	err := filepath.WalkDir(".", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		slash := filepath.ToSlash(path)
		if e.IsDir() {
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module: a user of the core
				}
			}
			return nil
		}
		if !strings.HasSuffix(slash, ".go") || strings.HasSuffix(slash, "_test.go") ||
			strings.HasPrefix(slash, "dialects/registry/") || strings.HasPrefix(slash, "internal/pgtest/") ||
			strings.HasPrefix(slash, "internal/soak/") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			for _, dir := range own {
				if dir == "dialects/internal/" || !strings.HasPrefix(p+"/", module+dir) {
					continue
				}
				if !strings.HasPrefix(slash, dir) {
					found = append(found, slash+" imports "+p)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "only dialects/registry imports a database package")
}
