package engine

import (
	"bytes"
	"testing"
)

// Both read paths deliver a value whole, whether it fits the caller's buffer or not, and report
// a missing key as not found.
func TestBlobcacheReadPaths(t *testing.T) {
	for _, path := range []string{ReadAt, Reader} {
		t.Run(path, func(t *testing.T) {
			e, err := Open("blobcache", Config{Dir: t.TempDir(), MemoryBudget: 64 << 20, ExpectedKeys: 10, BlobcacheRead: path})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			value := bytes.Repeat([]byte("0123456789"), 1000) // 10000 B
			if err := e.Put([]byte("k"), value); err != nil {
				t.Fatal(err)
			}
			for _, flushed := range []bool{false, true} {
				if flushed {
					if err := e.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				for _, size := range []int{len(value) + 1, len(value), 4096} {
					buf := make([]byte, size)
					n, found, err := e.Get([]byte("k"), buf)
					if err != nil || !found || n != len(value) {
						t.Errorf("flushed %v, buffer %d: Get = %d, %v, %v; want %d, true, nil", flushed, size, n, found, err, len(value))
					}
					if size > len(value) && !bytes.Equal(buf[:n], value) {
						t.Errorf("flushed %v, buffer %d: wrong bytes", flushed, size)
					}
				}
				if n, found, err := e.Get([]byte("absent"), make([]byte, 10)); n != 0 || found || err != nil {
					t.Errorf("absent key: %d, %v, %v", n, found, err)
				}
			}
		})
	}
}
