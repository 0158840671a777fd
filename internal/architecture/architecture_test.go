package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the import path every package of the tree starts with.
const module = "github.com/micrograph/micrograph"

// A layer is some folders of the tree; a package may import the packages of
// its own layer and of layers of a lower rank. Layers of the same rank
// stand beside each other: neither imports the other. Go refuses cycles
// between packages, and the ranks keep the layers acyclic.
type layer struct {
	name string
	rank int
}

// layers are docs/layout.md's, by folder: the most specific prefix names a
// package's layer. trainer/pretrain, which writes run folders, is a layer
// of its own above the rest of trainer/, which reads them through
// trainer/runfolder.
var layers = map[string]layer{
	"internal":         {"internal", 0},
	"torch":            {"torch", 1},
	"graph":            {"graph", 2},
	"ops":              {"ops", 3},
	"model":            {"model", 4},
	"data":             {"data", 4},
	"trainer":          {"trainer", 5},
	"trainer/pretrain": {"trainer/pretrain", 6},
	"cmd":              {"cmd", 7},
}

// layerOf is the layer of the package in folder dir (relative to the
// module's root, with slashes).
func layerOf(dir string) (layer, bool) {
	for p := dir; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
		if l, ok := layers[p]; ok {
			return l, true
		}
	}
	return layer{}, false
}

// root is the module's root folder.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// sources parses every Go file of the tree that is not a test, by
// package folder (relative, with slashes); mode says how much of each.
func sources(t *testing.T, mode parser.Mode) (*token.FileSet, map[string][]*ast.File) {
	t.Helper()
	top := root(t)
	fset := token.NewFileSet()
	files := map[string][]*ast.File{}
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != top && (strings.HasPrefix(name, ".") || name == "testdata" || name == "third_party" || name == "build" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(top, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		files[rel] = append(files[rel], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fset, files
}

// Every package lies in a layer, and imports only packages of its own
// layer and of layers below it (docs/layout.md).
func TestImportsFollowTheLayers(t *testing.T) {
	fset, files := sources(t, parser.ImportsOnly)
	if len(files) < 20 {
		t.Fatalf("only %d packages found: not the tree", len(files))
	}
	for _, dir := range slices.Sorted(maps.Keys(files)) {
		from, ok := layerOf(dir)
		if !ok {
			t.Errorf("%s is in no layer: add its folder to layers here and to docs/layout.md", dir)
			continue
		}
		for _, f := range files[dir] {
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				rel, ok := strings.CutPrefix(path, module+"/")
				if !ok {
					continue
				}
				to, ok := layerOf(rel)
				if !ok {
					t.Errorf("%s imports %s, which is in no layer", fset.Position(imp.Pos()), rel)
					continue
				}
				if to.name != from.name && to.rank >= from.rank {
					t.Errorf("%s: %s (layer %s) imports %s (layer %s), which is not below it", fset.Position(imp.Pos()), dir, from.name, rel, to.name)
				}
			}
		}
	}
}

// A command-line flag, as a message would name it.
var flagName = regexp.MustCompile("(^|[\\s(\"'`])--[a-z][a-z0-9-]*")

// No string below cmd/ names a flag: libraries name configuration fields,
// and cmd/ maps them to its flags (its flagError and hints).
func TestNoFlagNamesBelowCmd(t *testing.T) {
	fset, files := sources(t, 0)
	for dir, fs := range files {
		if l, _ := layerOf(dir); l.name == "cmd" {
			continue
		}
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil && flagName.MatchString(s) {
					t.Errorf("%s: %s names a flag %q", fset.Position(lit.Pos()), lit.Value, strings.TrimSpace(flagName.FindString(s)))
				}
				return true
			})
		}
	}
}

// Bounds the tree keeps to: lines of Go (tests not counted) per package,
// lines of the two entry points that decide where a run runs, and methods
// of model.Objective.
const (
	maxPackageLines     = 3000
	maxRunPretrain      = 100
	maxRunBench         = 60
	maxObjectiveMethods = 10
)

// No package holds more than maxPackageLines lines of Go besides its
// tests; the command layer's runPretrain and runBench stay short (the
// launch decision is launch.go's, the work the libraries'), and
// model.Objective stays narrow (what only some objectives do is an
// interface of its own).
func TestSizes(t *testing.T) {
	fset, files := sources(t, parser.ParseComments)
	for dir, fs := range files {
		lines := 0
		for _, f := range fs {
			lines += fset.File(f.Pos()).LineCount()
		}
		if lines > maxPackageLines {
			t.Errorf("%s: %d lines of Go besides its tests, more than %d: split it by responsibility", dir, lines, maxPackageLines)
		}
	}
	funcs := map[string]int{}
	for _, f := range files["cmd/micrograph"] {
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				funcs[fn.Name.Name] = fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			}
		}
	}
	for name, most := range map[string]int{"runPretrain": maxRunPretrain, "runBench": maxRunBench} {
		switch n, ok := funcs[name]; {
		case !ok:
			t.Errorf("cmd/micrograph has no func %s", name)
		case n > most:
			t.Errorf("cmd/micrograph's %s is %d lines, more than %d", name, n, most)
		}
	}
	methods := -1
	for _, f := range files["model"] {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Objective" {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					methods = len(it.Methods.List)
				}
			}
			return true
		})
	}
	switch {
	case methods < 0:
		t.Error("model has no interface Objective")
	case methods > maxObjectiveMethods:
		t.Errorf("model.Objective has %d methods, more than %d", methods, maxObjectiveMethods)
	}
}
