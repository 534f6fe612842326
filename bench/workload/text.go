package workload

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Values cut from random bytes do not compress; values cut from text do, as logs, JSON and
// source files do. The text here is Go's own source tree: on every machine that builds the
// bench, the same bytes for the same Go version, and nothing to download.

// PayloadOf returns a payload whose values are cut from buf (a text corpus, say) instead of
// random bytes. buf must not be modified while the payload is in use.
func PayloadOf(buf []byte) *Payload { return &Payload{buf: buf} }

// Len is the payload's length in bytes: the longest value it can serve.
func (p *Payload) Len() int { return len(p.buf) }

// Pieces is how many values of n bytes the payload holds end to end (at least 1). n must be
// at most Len.
func (p *Payload) Pieces(n int) int { return max(len(p.buf)/max(n, 1), 1) }

// Piece returns value i of n bytes when the payload is cut into consecutive pieces of n bytes:
// piece i mod Pieces(n). Unlike Value, consecutive indexes read the payload in order, so a run
// of Pieces(n) values covers it once. The slice aliases the payload: callers must not modify it.
func (p *Payload) Piece(i uint64, n int) []byte {
	off := i % uint64(p.Pieces(n)) * uint64(n)
	return p.buf[off : off+uint64(n)]
}

// GoRoot returns the root of the Go installation that the go command on the PATH uses
// (`go env GOROOT`).
func GoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("workload: go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", fmt.Errorf("workload: go env GOROOT printed nothing")
	}
	return root, nil
}

// GoSource returns the *.go files under dir concatenated in lexical order of their paths, and
// how many there were. With dir $(go env GOROOT)/src that is about 80 MB of text that zstd's
// fastest level shrinks about fourfold.
func GoSource(dir string) (text []byte, files int, err error) {
	var b bytes.Buffer
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b.Write(f)
		files++
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("workload: read the Go source under %s: %w", dir, err)
	}
	if files == 0 {
		return nil, 0, fmt.Errorf("workload: no .go file under %s", dir)
	}
	return b.Bytes(), files, nil
}
