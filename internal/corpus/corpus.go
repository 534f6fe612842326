package corpus

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var goroot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("corpus: go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", fmt.Errorf("corpus: go env GOROOT printed nothing")
	}
	return root, nil
})

// GoRoot is the root of the Go installation the go command on the PATH uses (`go env GOROOT`),
// asked once.
func GoRoot() (string, error) { return goroot() }

// GoSource returns bytes [skip, skip+n) of the Go source tree's .go files, concatenated in walk
// order (the same bytes on every call with the same toolchain).
func GoSource(skip, n int) ([]byte, error) {
	root, err := goroot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "src")
	out, _, err := Dir(dir, skip+n)
	if err != nil {
		return nil, err
	}
	if len(out) < skip+n {
		return nil, fmt.Errorf("corpus: only %d bytes of Go source under %s, %d wanted", len(out), dir, skip+n)
	}
	return out[skip : skip+n : skip+n], nil
}

// Dir returns the .go files under dir concatenated in walk order (lexical, by path), and how many
// there were; it stops after the file that brings the text to at least limit bytes (limit <= 0:
// all of them). A directory without a .go file is an error.
func Dir(dir string, limit int) (text []byte, files int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if limit > 0 && len(text) >= limit {
			return fs.SkipAll
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text = append(text, b...)
		files++
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("corpus: read the Go source under %s: %w", dir, err)
	}
	if files == 0 {
		return nil, 0, fmt.Errorf("corpus: no .go file under %s", dir)
	}
	return text, files, nil
}
