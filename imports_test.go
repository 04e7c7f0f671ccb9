package lattice_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/latticehpc/lattice"

// TestPackagesImportOnlyWhatTheTableAllows checks every non-test Go file
// of the module against docs/ARCHITECTURE.md's "Who may import whom".
func TestPackagesImportOnlyWhatTheTableAllows(t *testing.T) {
	table := readImportTable(t, "docs/ARCHITECTURE.md")
	imports := moduleImports(t)
	if len(imports) < 20 {
		t.Fatalf("found only %d packages: the walk is broken", len(imports))
	}
	var pkgs []string
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		row, ok := rowFor(table, pkg)
		if !ok {
			t.Errorf("package %s has no row in docs/ARCHITECTURE.md's import table: add one", pkg)
			continue
		}
		for _, imp := range imports[pkg] {
			if !allowed(table[row], pkg, imp) {
				t.Errorf("%s imports %s, which its row (%s) does not allow: %v", pkg, imp, row, table[row])
			}
		}
	}
}

// The checker itself: a row covers sub-packages, an entry allows its
// subtree, a more specific row wins, a top-level package may import its
// own sub-packages.
func TestImportTableRules(t *testing.T) {
	table := map[string][]string{"rpc": {"api", "model"}, "rpc/convert": {"api"}, "leader": {"rpc/convert"}, "server": {"any"}, "cmd/x": {"server"}}
	for _, tc := range []struct {
		pkg, imp string
		ok       bool
	}{
		{"rpc/rest", "api/lattice/v1", true},
		{"rpc/rest", "rpc/convert", true}, // its own top-level package
		{"rpc/convert", "model", false},   // its own row
		{"leader", "rpc/convert", true},
		{"leader", "rpc/rest", false},
		{"server", "leader", true},
		{"server", "cmd/x", false},
		{"cmd/x", "leader", false},
		{"cmd/x", "cmd/x/startup", true}, // its own sub-package
		{"cmd/x", "cmd/y", false},
	} {
		row, ok := rowFor(table, tc.pkg)
		if got := ok && allowed(table[row], tc.pkg, tc.imp); got != tc.ok {
			t.Errorf("%s → %s: allowed %v, want %v", tc.pkg, tc.imp, got, tc.ok)
		}
	}
}

// readImportTable parses the "Who may import whom" table: package → the
// packages it may import.
func readImportTable(t *testing.T, path string) map[string][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Who may import whom"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("%s: malformed row %q", path, line)
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var may []string
		for _, e := range strings.Split(cells[2], ",") {
			if e = strings.Trim(strings.TrimSpace(e), "`"); e != "" && e != "—" {
				may = append(may, e)
			}
		}
		table[pkg] = may
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatalf("%s has no \"Who may import whom\" table", path)
	}
	return table
}

// moduleImports maps every package of the module (its path relative to the
// module) to the module packages its non-test files import.
func moduleImports(t *testing.T) map[string][]string {
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			return nil
		}
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok && !contains(out[pkg], rel) {
				out[pkg] = append(out[pkg], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rowFor is the most specific row covering pkg.
func rowFor(table map[string][]string, pkg string) (string, bool) {
	for p := pkg; ; {
		if _, ok := table[p]; ok {
			return p, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return "", false
		}
		p = p[:i]
	}
}

func allowed(may []string, pkg, imp string) bool {
	if strings.HasPrefix(imp, pkg+"/") || top(imp) == top(pkg) && top(pkg) != "cmd" {
		return true
	}
	for _, m := range may {
		if m == "any" && top(imp) != "cmd" || imp == m || strings.HasPrefix(imp, m+"/") {
			return true
		}
	}
	return false
}

func top(p string) string { first, _, _ := strings.Cut(p, "/"); return first }

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
