// Command archcount prints the measures of the root package's structure that the architecture
// issues track: the fields and methods of Cache and writer and the files their methods are in,
// the lines of writer.go, the files that touch what the cache keeps (the policy's state), the
// calls that make a user checksum hash outside the value check, and the byte layouts written in
// the root. Run it from the repository's root: go run ./scripts/archcount
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// policyState matches a field of the cache or the writer that holds what the cache keeps, under
// the names of before and after internal/policy.
var policyState = regexp.MustCompile(`\bc\.(admission|budget|rs|regions|ghost|keep)\b|\bw\.(reinsertCredit|creditPerByte|mainFloor|credit)\b`)

func main() {
	files, err := filepath.Glob("*.go")
	if err != nil {
		fail(err)
	}
	fset := token.NewFileSet()
	fields := map[string]int{}
	methods := map[string]int{}
	methodFiles := map[string]map[string]bool{}
	var touchPolicy, hashCalls, layouts []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			fail(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								fields[ts.Name.Name] += max(len(fl.Names), 1)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				t := d.Recv.List[0].Type
				if se, ok := t.(*ast.StarExpr); ok {
					t = se.X
				}
				if id, ok := t.(*ast.Ident); ok {
					methods[id.Name]++
					if methodFiles[id.Name] == nil {
						methodFiles[id.Name] = map[string]bool{}
					}
					methodFiles[id.Name][name] = true
				}
			}
		}
		src, err := os.ReadFile(name)
		if err != nil {
			fail(err)
		}
		text := string(src)
		if policyState.MatchString(text) {
			touchPolicy = append(touchPolicy, name)
		}
		sc := bufio.NewScanner(strings.NewReader(text))
		for line := 1; sc.Scan(); line++ {
			l := sc.Text()
			if strings.Contains(l, "ChecksumHash()") && !strings.HasPrefix(strings.TrimSpace(l), "//") {
				hashCalls = append(hashCalls, fmt.Sprintf("%s:%d", name, line))
			}
			if strings.Contains(l, "binary.LittleEndian") || strings.Contains(l, "binary.BigEndian") {
				layouts = append(layouts, fmt.Sprintf("%s:%d", name, line))
			}
		}
	}
	writerLines := 0
	if b, err := os.ReadFile("writer.go"); err == nil {
		writerLines = strings.Count(string(b), "\n")
	}
	for _, t := range []string{"Cache", "writer"} {
		fmt.Printf("%s: %d fields, %d methods in %d files\n", t, fields[t], methods[t], len(methodFiles[t]))
	}
	fmt.Printf("writer.go: %d lines\n", writerLines)
	sort.Strings(touchPolicy)
	fmt.Printf("files touching policy state: %d %v\n", len(touchPolicy), touchPolicy)
	fmt.Printf("ChecksumHash() call sites: %d %v\n", len(hashCalls), hashCalls)
	fmt.Printf("binary byte layouts in the root: %d %v\n", len(layouts), layouts)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "archcount:", err)
	os.Exit(1)
}
