package intent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

func TestPendingSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "INTENTS")
	l, pending, err := Open(path, 4)
	if err != nil || len(pending) != 0 {
		t.Fatalf("Open: %v, %d pending", err, len(pending))
	}
	for i := range 4 {
		if _, err := l.Append(Intent{Hash: uint64(i + 1), Version: uint64(100 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(Intent{Hash: 9, Version: 9}); !errors.Is(err, ErrFull) || !l.Full() {
		t.Fatalf("a fifth intent in four slots: %v", err)
	}
	l.Done(2)
	if _, err := l.Append(Intent{Hash: 5, Version: 104}); err != nil {
		t.Fatal(err)
	}
	// No Close: what the process stored in the mapping is what the next open reads.
	l2, pending, err := Open(path, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	want := []Intent{{3, 102}, {4, 103}, {5, 104}}
	if len(pending) != len(want) {
		t.Fatalf("pending %v, want %v", pending, want)
	}
	for i := range want {
		if pending[i] != want[i] {
			t.Fatalf("pending %v, want %v", pending, want)
		}
	}
	l.Close()
}

func TestResizedLogKeepsPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "INTENTS")
	l, _, err := Open(path, 8)
	if err != nil {
		t.Fatal(err)
	}
	l.Append(Intent{Hash: 1, Version: 1})
	l.Close()
	l, pending, err := Open(path, 16)
	if err != nil || len(pending) != 1 || pending[0] != (Intent{1, 1}) {
		t.Fatalf("reopened with more slots: %v, %v", pending, err)
	}
	if l.Next() != 0 {
		t.Fatal("a log made anew does not start empty")
	}
	l.Close()
}

func TestDamageIsCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "INTENTS")
	l, _, err := Open(path, 8)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, _ := os.ReadFile(path)
	b[20] = 0xff // first past next
	if _, err := Decode(b); !errors.Is(err, corruption.ErrCorrupt) {
		t.Fatalf("Decode of a damaged header: %v", err)
	}
}

// FuzzDecode: any bytes decode to at most the ring's intents, or to an error wrapping
// corruption.ErrCorrupt; never a panic.
func FuzzDecode(f *testing.F) {
	path := filepath.Join(f.TempDir(), "INTENTS")
	l, _, err := Open(path, 4)
	if err != nil {
		f.Fatal(err)
	}
	l.Append(Intent{Hash: 7, Version: 8})
	l.Close()
	b, _ := os.ReadFile(path)
	f.Add(b)
	f.Add(b[:100])
	f.Fuzz(func(t *testing.T, b []byte) {
		pending, err := Decode(b)
		if err != nil {
			if !errors.Is(err, corruption.ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if int64(len(pending))*slotLen > int64(len(b)) {
			t.Fatalf("%d intents from %d bytes", len(pending), len(b))
		}
	})
}

// BenchmarkAppend is what an intent costs a write: two stores into the mapping.
func BenchmarkAppend(b *testing.B) {
	l, _, err := Open(filepath.Join(b.TempDir(), "INTENTS"), 1<<16)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		p, err := l.Append(Intent{Hash: i, Version: i})
		if err != nil {
			b.Fatal(err)
		}
		l.Done(p + 1)
		i++
	}
}

// BenchmarkPwrite is the comparator: the same 16 bytes written with a system call each, as an
// intent log without a mapping would write them (to the page cache, unsynced).
func BenchmarkPwrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "INTENTS"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var rec [16]byte
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		if _, err := f.WriteAt(rec[:], (i%(1<<16))*16); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
