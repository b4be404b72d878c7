package dialects

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcreteDialectsExportOnlyTheInterface guards the API: the exported
// methods of PostgreSQL, MySQL and Oracle in the package's own (non-test)
// files are those of Dialect and ClaimsFinalizer; the statement builders
// behind them stay unexported (the golden tests reach them through
// export_test.go).
func TestConcreteDialectsExportOnlyTheInterface(t *testing.T) {
	allowed := map[string]bool{}
	for _, it := range []reflect.Type{reflect.TypeFor[Dialect](), reflect.TypeFor[ClaimsFinalizer]()} {
		for i := range it.NumMethod() {
			allowed[it.Method(i).Name] = true
		}
	}
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var extra []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			recv, ok := star.X.(*ast.Ident)
			if !ok || (recv.Name != "PostgreSQL" && recv.Name != "MySQL" && recv.Name != "Oracle") {
				continue
			}
			if !allowed[fn.Name.Name] {
				extra = append(extra, recv.Name+"."+fn.Name.Name+" ("+name+")")
			}
		}
	}
	require.Empty(t, extra, "exported methods beyond Dialect and ClaimsFinalizer")
}
