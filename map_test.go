package blobcache

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestDesignMap holds docs/DESIGN.md's map to the code: every root file and every internal
// package has a row and every row names one that exists, every internal package has a doc.go,
// an internal package imports only those its row allows, each of them below it in the table (test
// files excepted: they may use any test helper), the root, tests included, imports only internal
// packages of the module, and server/ and cmd/ import none of those outside their tests.
func TestDesignMap(t *testing.T) {
	const module = "github.com/seed57392e9e/blobcache/"
	doc, err := os.ReadFile("docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## Map\n")
	end := strings.Index(text[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/DESIGN.md has no ## Map section")
	}
	mapText := text[start : start+1+end]

	// The rows: a root file's `name.go` in its first cell; an internal package's `name` in its
	// first cell and what it may import in its third.
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9_./]+)` \\|(.*)$")
	var files []string
	var pkgs []string
	allowed := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(mapText, -1) {
		name := m[1]
		if strings.HasSuffix(name, ".go") {
			files = append(files, name)
			continue
		}
		cells := strings.Split(m[2], "|")
		if len(cells) < 3 {
			t.Fatalf("row of package %s has no column of what it may import", name)
		}
		pkgs = append(pkgs, name)
		for _, imp := range regexp.MustCompile("`([a-z0-9_/]+)`").FindAllStringSubmatch(cells[1], -1) {
			allowed[name] = append(allowed[name], imp[1])
		}
	}

	// Root files.
	goFiles, _ := filepath.Glob("*.go")
	for _, f := range goFiles {
		if !strings.HasSuffix(f, "_test.go") && !slices.Contains(files, f) {
			t.Errorf("%s has no row in DESIGN's map", f)
		}
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("DESIGN's map has a row for %s, which does not exist", f)
		}
	}
	for _, f := range goFiles {
		// Not even a test of the root imports server/, cmd/ or bench/.
		for _, imp := range imports(t, f) {
			if p, ok := strings.CutPrefix(imp, module); ok && !strings.HasPrefix(p, "internal/") {
				t.Errorf("%s imports %s: the root imports no package of the module outside internal/", f, imp)
			}
		}
	}

	// Internal packages: every directory with Go files under internal/.
	var found []string
	err = filepath.WalkDir("internal", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		if names, _ := filepath.Glob(filepath.Join(path, "*.go")); len(names) > 0 {
			found = append(found, strings.TrimPrefix(path, "internal/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range found {
		if !slices.Contains(pkgs, p) {
			t.Errorf("internal/%s has no row in DESIGN's map", p)
		}
		if _, err := os.Stat(filepath.Join("internal", p, "doc.go")); err != nil {
			t.Errorf("internal/%s has no doc.go", p)
		}
	}
	for i, p := range pkgs {
		if !slices.Contains(found, p) {
			t.Errorf("DESIGN's map has a row for internal/%s, which does not exist", p)
			continue
		}
		for _, a := range allowed[p] {
			if j := slices.Index(pkgs, a); j <= i {
				t.Errorf("DESIGN's map lets internal/%s import %s, which is not below it in the table", p, a)
			}
		}
		names, _ := filepath.Glob(filepath.Join("internal", p, "*.go"))
		for _, f := range names {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			for _, imp := range imports(t, f) {
				q, ok := strings.CutPrefix(imp, module+"internal/")
				if ok && !slices.Contains(allowed[p], q) {
					t.Errorf("%s imports internal/%s, which DESIGN's map does not let internal/%s import", f, q, p)
				}
				if !ok && strings.HasPrefix(imp, module) {
					t.Errorf("%s imports %s, outside internal/", f, imp)
				}
			}
		}
	}

	// server/ and cmd/ use the root package, not its internals.
	for _, top := range []string{"server", "cmd"} {
		err := filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			for _, imp := range imports(t, path) {
				if strings.HasPrefix(imp, module+"internal/") {
					t.Errorf("%s imports %s: outside the library only the root package is used", path, imp)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// imports lists the import paths of the Go file at path.
func imports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range f.Imports {
		p, err := strconv.Unquote(s.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}
