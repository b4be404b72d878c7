package dialects_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/oncebox/watermill-oncebox/dialects"
	"github.com/oncebox/watermill-oncebox/dialects/registry"
	"github.com/stretchr/testify/require"
)

// TestConcreteDialectsExportOnlyTheInterface guards the API: the exported
// methods of each database package's Dialect type in its own (non-test)
// files are those of dialects.Dialect and its optional roles
// dialects.ClaimsFinalizer, dialects.NextDueReader,
// dialects.ConsoleInspector, dialects.PartitionMaintainer and
// dialects.ConfirmedDeleter; the
// statement builders behind them stay unexported (the golden tests reach
// them through each package's export_test.go).
func TestConcreteDialectsExportOnlyTheInterface(t *testing.T) {
	allowed := map[string]bool{}
	for _, it := range []reflect.Type{reflect.TypeFor[dialects.Dialect](), reflect.TypeFor[dialects.ClaimsFinalizer](),
		reflect.TypeFor[dialects.NextDueReader](), reflect.TypeFor[dialects.ConsoleInspector](),
		reflect.TypeFor[dialects.PartitionMaintainer](), reflect.TypeFor[dialects.ConfirmedDeleter](),
		reflect.TypeFor[dialects.Partitioner]()} {
		for i := range it.NumMethod() {
			allowed[it.Method(i).Name] = true
		}
	}
	// WithPartitions is PostgreSQL's opt-in to a partitioned outbox
	// (config outbox.partitions): it returns the dialect with migration
	// step 1001 added, so it is a constructor's option, not a statement.
	allowed["WithPartitions"] = true
	for _, db := range registry.All() {
		extra, seen := exportedBeyond(t, db.Name, allowed)
		require.Positive(t, seen, "%s: no method of Dialect found in dialects/%s", db.Name, db.Name)
		require.Empty(t, extra, "%s: exported methods beyond Dialect, ClaimsFinalizer, NextDueReader, ConsoleInspector, PartitionMaintainer, Partitioner, ConfirmedDeleter and WithPartitions", db.Name)
	}
}

// exportedBeyond reads the non-test files of dir and returns the exported
// methods of its type Dialect that allowed does not hold, and how many
// exported methods of Dialect it saw.
func exportedBeyond(t *testing.T, dir string, allowed map[string]bool) (extra []string, seen int) {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
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
			if !ok || recv.Name != "Dialect" {
				continue
			}
			seen++
			if !allowed[fn.Name.Name] {
				extra = append(extra, recv.Name+"."+fn.Name.Name+" ("+name+")")
			}
		}
	}
	return extra, seen
}
