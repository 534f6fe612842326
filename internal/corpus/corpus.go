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
	return strings.TrimSpace(string(out)), nil
})

// GoSource returns bytes [skip, skip+n) of the Go source tree's .go files, concatenated in walk
// order (the same bytes on every call with the same toolchain).
func GoSource(skip, n int) ([]byte, error) {
	root, err := goroot()
	if err != nil {
		return nil, err
	}
	var out []byte
	err = filepath.WalkDir(filepath.Join(root, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(out) >= skip+n {
			return fs.SkipAll
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, b...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	if len(out) < skip+n {
		return nil, fmt.Errorf("corpus: only %d bytes of Go source under %s, %d wanted", len(out), root, skip+n)
	}
	return out[skip : skip+n : skip+n], nil
}
