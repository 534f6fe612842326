package corpus

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDir: the .go files of a directory, in lexical order of their paths, and no other file;
// a missing directory is an error.
func TestDir(t *testing.T) {
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
	text, files, err := Dir(dir, 0)
	if err != nil || files != 2 || !bytes.Equal(text, []byte("package a\npackage b\n")) {
		t.Errorf("Dir = %q, %d files, %v; want a.go then b.go, 2 files", text, files, err)
	}
	if _, _, err := Dir(filepath.Join(dir, "a", "none"), 0); err == nil {
		t.Error("Dir of a missing directory: no error")
	}
}
