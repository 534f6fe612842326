package cachedir

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

func TestReplaceAndRead(t *testing.T) {
	name := filepath.Join(t.TempDir(), StateFile)
	for _, data := range [][]byte{[]byte("first"), []byte("second, longer"), {}, []byte("x")} {
		if err := Replace(vfs.Default, name, data); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(vfs.Default, name)
		if err != nil || string(got) != string(data) {
			t.Fatalf("ReadFile: %q, %v; want %q", got, err, data)
		}
		if _, err := os.Stat(name + TempSuffix); !os.IsNotExist(err) {
			t.Fatalf("temporary file left: %v", err)
		}
	}
	if _, err := ReadFile(vfs.Default, name+".missing"); !os.IsNotExist(err) {
		t.Fatalf("ReadFile of a missing file: %v", err)
	}
}

// TestReplaceFaults: a Replace that fails at any step before the rename leaves the old bytes
// and no temporary file, and keeps the cause.
func TestReplaceFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault errorfs.Fault
		old   bool // the old bytes are still there
	}{
		{"create", errorfs.Fault{Ops: errorfs.OpCreate, Name: "*.tmp", Err: syscall.ENOSPC}, true},
		{"write", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.tmp", Err: syscall.ENOSPC}, true},
		{"torn write", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.tmp", Action: errorfs.Tear, Off: 3, Err: syscall.EIO}, true},
		{"sync", errorfs.Fault{Ops: errorfs.OpSync, Name: "*.tmp", Err: syscall.EIO}, true},
		{"rename", errorfs.Fault{Ops: errorfs.OpRename, Name: "*.tmp", Err: syscall.EIO}, true},
		{"sync dir", errorfs.Fault{Ops: errorfs.OpSyncDir, Err: syscall.EIO}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := errorfs.New(vfs.Default, 1)
			name := filepath.Join(t.TempDir(), BloomFile)
			if err := Replace(fs, name, []byte("old bytes")); err != nil {
				t.Fatal(err)
			}
			fault := tc.fault
			fs.Add(&fault)
			err := Replace(fs, name, []byte("new bytes"))
			if want := fault.Err; !errors.Is(err, want) {
				t.Fatalf("Replace: %v, want %v", err, want)
			}
			fs.Clear()
			if _, err := os.Stat(name + TempSuffix); !os.IsNotExist(err) {
				t.Fatalf("temporary file left: %v", err)
			}
			got, err := os.ReadFile(name)
			if want := map[bool]string{true: "old bytes", false: "new bytes"}[tc.old]; err != nil || string(got) != want {
				t.Fatalf("after the failed Replace: %q, %v; want %q", got, err, want)
			}
		})
	}
}
