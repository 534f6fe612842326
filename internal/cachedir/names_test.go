package cachedir

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Kind
	}{
		{"LOCK", Own},
		{"BLOBCACHE", Own},
		{"STATE", Own},
		{"bloom.dat", Own},
		{"BOUND", Own},
		{"INTENTS", Own},
		{"segments", Own},
		{"blobs", Own},
		{"BLOBCACHE.tmp", Temp},
		{"STATE.tmp", Temp},
		{"bloom.dat.tmp", Temp},
		{"BOUND.tmp", Temp},
		{"LOCK.tmp", Stray}, // the lock is never replaced
		{"segments.tmp", Stray},
		{"other.tmp", Stray},
		{".tmp", Stray},
		{"STATE.tmp.tmp", Stray},
		{"notes.txt", Stray},
		{"state", Stray},
		{"", Stray},
	} {
		if got := Classify(tc.name); got != tc.want {
			t.Errorf("Classify(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSurvey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     []string
		want      Contents
		wantEntry string
	}{
		{"empty", nil, Empty, ""},
		{"lock only", []string{"LOCK"}, Empty, ""},
		{"creation cut short", []string{"LOCK", "BLOBCACHE.tmp"}, Empty, ""},
		{"cache", []string{"BLOBCACHE", "LOCK", "notes.txt"}, Cache, ""},
		{"foreign", []string{"LOCK", "notes.txt"}, Foreign, "notes.txt"},
		{"state without identity", []string{"STATE"}, Foreign, "STATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			what, entry, err := Survey(vfs.Default, dir)
			if err != nil || what != tc.want || entry != tc.wantEntry {
				t.Fatalf("Survey: %v, %q, %v; want %v, %q", what, entry, err, tc.want, tc.wantEntry)
			}
		})
	}
	if _, _, err := Survey(vfs.Default, filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Fatalf("Survey of a missing directory: %v", err)
	}
}
