package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/corruption"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// logEntries returns n entries of records of 40 to 140 bytes laid out from HeaderSize, with
// a gap (a pad) now and then, and where the last one ends.
func logEntries(rng *rand.Rand, n int) ([]Entry, int64) {
	entries := make([]Entry, n)
	off := int64(HeaderSize)
	for i := range entries {
		if rng.IntN(50) == 0 {
			off += int64(rng.IntN(4096)) // a pad
		}
		e := Entry{Hash: rng.Uint64() | 1, Offset: uint32(off), Length: uint32(40 + rng.IntN(100)), Kind: record.KindPut, Flags: uint8(rng.IntN(4))}
		if rng.IntN(10) == 0 {
			e.Kind = record.KindDelete
		}
		entries[i] = e
		off += int64(e.Length)
	}
	return entries, off
}

// TestEntryLogSeal adds several chunks of entries to an active segment, some out of record
// order (as streamed records are committed), and checks that the seal writes exactly the footer
// WriteFooter writes for the entries in record order, that the entries were on disk in the log
// and not in memory before the seal, and that DropLog removes the log.
func TestEntryLogSeal(t *testing.T) {
	for _, n := range []int{0, 1, logChunkEntries - 1, logChunkEntries, 3*logChunkEntries + 17} {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		entries, end := logEntries(rng, n)
		dir := t.TempDir()
		a, err := Create(vfs.Default, dir, 1, 64<<20, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Every 1000th entry comes late: after the next 300.
		order, late := slices.Clone(entries), 0
		for i := 0; i+301 < len(order); i += 1000 {
			late++
			e := order[i]
			copy(order[i:], order[i+1:i+301])
			order[i+300] = e
		}
		for _, e := range order {
			a.AddEntry(e)
		}
		logPath := filepath.Join(dir, EntryLogName(1))
		fi, err := os.Stat(logPath)
		// Late entries stay in memory (streamed records: one per write buffer of data at most);
		// LogSpace counts them as logged, so it is never below the log's space.
		if chunks := int64((n - late) / logChunkEntries); chunks == 0 {
			if err == nil {
				t.Fatalf("%d entries: a log file of %d bytes, want none below a chunk", n, fi.Size())
			}
		} else if err != nil || fi.Size() != chunks*logChunkBytes || LogSpace(int64(n)) < chunks*LogChunkSpace {
			t.Fatalf("%d entries: log %v (err %v), want %d chunks", n, fi, err, chunks)
		}
		if len(a.log.buf) > logChunkEntries*EntrySize || cap(a.log.buf) > logChunkBytes {
			t.Fatalf("%d entries: %d bytes (cap %d) in memory, want at most a chunk", n, len(a.log.buf), cap(a.log.buf))
		}
		// The records themselves do not matter to the footer: a data end past them will do.
		size, err := a.Seal(end)
		if err != nil {
			t.Fatalf("%d entries: Seal: %v", n, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, FileName(1)))
		if err != nil {
			t.Fatal(err)
		}
		want := AppendFooter(nil, entries, uint64(end))
		if size != end+int64(len(want)) || int64(len(got)) != size || !bytes.Equal(got[end:], want) {
			t.Fatalf("%d entries: sealed file of %d bytes (Seal says %d), footer differs from AppendFooter's (%d bytes)", n, len(got), size, len(want))
		}
		f, fsize, err := Open(vfs.Default, dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		read, dataEnd, err := ReadFooter(f, fsize)
		f.Close()
		if err != nil || dataEnd != end {
			t.Fatalf("%d entries: ReadFooter: end %d, %v", n, dataEnd, err)
		}
		sameEntries(t, read, entries)
		if err := a.DropLog(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(logPath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%d entries: log still there after DropLog: %v", n, err)
		}
		a.Close()
	}
}

// TestEntryLogDamage: a chunk of the log that reads back damaged, or a log that cannot be
// written, makes the seal fail with the cause and write no trailer, so that the segment reads
// as unsealed (and Scan recovers it); a retried seal with the log intact succeeds.
func TestEntryLogDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	entries, end := logEntries(rng, 2*logChunkEntries+5)
	for _, tc := range []struct {
		name  string
		fault errorfs.Fault
		want  error
	}{
		{"flipped", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.entries", Action: errorfs.Flip, Off: logChunkBytes + 100, Len: 1, Times: 1}, corruption.ErrCorrupt},
		{"write-fails", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.entries", Times: 1}, syscall.EIO},
		{"create-fails", errorfs.Fault{Ops: errorfs.OpCreate, Name: "*.entries", Times: 1}, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default, 1)
			a, err := Create(efs, dir, 1, 64<<20, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			fault := efs.Add(&tc.fault)
			for _, e := range entries {
				a.AddEntry(e)
			}
			if _, err := a.Seal(end); !errors.Is(err, tc.want) {
				t.Fatalf("Seal = %v, want %v", err, tc.want)
			}
			if fault.Injected() == 0 {
				t.Fatal("the fault never fired")
			}
			f, size, err := Open(vfs.Default, dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := ReadFooter(f, size); !errors.Is(err, ErrNoFooter) {
				t.Fatalf("ReadFooter after a failed seal = %v, want ErrNoFooter", err)
			}
			f.Close()
			if tc.name == "flipped" {
				// The log on disk is intact: the flip was on the way back.
				if _, err := a.Seal(end); err != nil {
					t.Fatalf("second Seal: %v", err)
				}
			}
		})
	}
}

// TestParseEntryLogName: only names EntryLogName makes are entry logs.
func TestParseEntryLogName(t *testing.T) {
	if id, ok := ParseEntryLogName(EntryLogName(42)); !ok || id != 42 {
		t.Fatalf("ParseEntryLogName(%q) = %d, %v", EntryLogName(42), id, ok)
	}
	for _, name := range []string{FileName(42), "0000000042.entries", FileName(42) + ".entries.tmp", "x" + EntryLogName(42)} {
		if _, ok := ParseEntryLogName(name); ok {
			t.Errorf("ParseEntryLogName(%q) accepted it", name)
		}
	}
	if _, ok := ParseFileName(EntryLogName(42)); ok {
		t.Errorf("ParseFileName took an entry log for a segment")
	}
}

// BenchmarkAddEntry: logging a footer entry allocates nothing (the chunk buffer is reused).
func BenchmarkAddEntry(b *testing.B) {
	a, err := Create(vfs.Default, b.TempDir(), 1, MaxSize, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	e := Entry{Hash: 1, Offset: HeaderSize, Length: 100, Kind: record.KindPut}
	b.ReportAllocs()
	for b.Loop() {
		a.AddEntry(e)
		e.Offset += e.Length
	}
}

// FuzzEntryLogChunk: a chunk of an entry log read back from disk is accepted only whole, with
// its checksum holding and every entry a valid footer entry, and what is accepted re-encodes to
// the same bytes. With repair, the fuzzer's bytes get a valid checksum, so that the entry checks
// are reached.
func FuzzEntryLogChunk(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	entries, _ := logEntries(rng, logChunkEntries)
	var chunk []byte
	for _, e := range entries {
		chunk = appendEntry(chunk, e)
	}
	chunk = binary.LittleEndian.AppendUint32(chunk, record.CRC(chunk))
	f.Add(chunk, false)
	f.Add(chunk[:100], true)
	f.Add(bytes.Repeat([]byte{0}, logChunkBytes), true)
	f.Fuzz(func(t *testing.T, b []byte, repair bool) {
		// Short input stands for a chunk of zeros past it (what a file read back holds where
		// nothing was written).
		c := make([]byte, logChunkBytes)
		copy(c, b)
		n := logChunkEntries * EntrySize
		if repair {
			binary.LittleEndian.PutUint32(c[n:], record.CRC(c[:n]))
		}
		var got []byte
		err := eachLogged(c, "log", 0, func(e Entry) error {
			got = appendEntry(got, e)
			return nil
		})
		if err != nil {
			return
		}
		if !bytes.Equal(got, c[:n]) {
			t.Fatal("accepted entries re-encode to different bytes")
		}
	})
}
