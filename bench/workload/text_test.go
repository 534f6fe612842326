package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestPieces(t *testing.T) {
	p := PayloadOf([]byte("abcdefghij"))
	for _, tc := range []struct {
		i    uint64
		n    int
		want string
	}{{0, 3, "abc"}, {1, 3, "def"}, {2, 3, "ghi"}, {3, 3, "abc"}, {7, 3, "def"}, {0, 10, "abcdefghij"}, {5, 10, "abcdefghij"}, {4, 2, "ij"}, {5, 2, "ab"}} {
		if got := p.Piece(tc.i, tc.n); string(got) != tc.want {
			t.Errorf("Piece(%d, %d) = %q, want %q", tc.i, tc.n, got, tc.want)
		}
	}
	if p.Pieces(3) != 3 || p.Pieces(10) != 1 || p.Len() != 10 {
		t.Errorf("Pieces(3) %d, Pieces(10) %d, Len %d; want 3, 1, 10", p.Pieces(3), p.Pieces(10), p.Len())
	}
}

func TestGoSource(t *testing.T) {
	dir := t.TempDir()
	for name, s := range map[string]string{"b.go": "package b\n", "a/a.go": "package a\n", "c.txt": "not go\n"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text, files, err := GoSource(dir)
	if err != nil || files != 2 || !bytes.Equal(text, []byte("package a\npackage b\n")) {
		t.Errorf("GoSource = %q, %d files, %v; want a.go then b.go, 2 files", text, files, err)
	}
	if _, _, err := GoSource(filepath.Join(dir, "a", "none")); err == nil {
		t.Error("GoSource of a missing directory: no error")
	}
}
