package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/corruption"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// TestRecover: a sealed segment comes back from its footer; an unsealed one with a torn tail is
// scanned, cut back to its last whole record and sealed; one whose header was never written is
// repaired (not damage), and one whose header is damaged is repaired and reported.
func TestRecover(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := randomRecs(rng, 20, 3000)
	data, entries, end := layout(recs)

	t.Run("sealed", func(t *testing.T) {
		dir, a := writeUnsealed(t, data, 1<<20)
		if _, err := sealWith(a, entries, end); err != nil {
			t.Fatal(err)
		}
		rec, err := Recover(vfs.Default, dir, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.File.Close()
		if rec.Scanned || rec.HeaderRepaired || rec.DataEnd != end {
			t.Fatalf("scanned %v, repaired %v, data end %d (want %d)", rec.Scanned, rec.HeaderRepaired, rec.DataEnd, end)
		}
		sameEntries(t, recEntries(t, rec), entries)
	})
	t.Run("torn tail", func(t *testing.T) {
		last := entries[len(entries)-1]
		dir, _ := writeUnsealed(t, data[:len(data)-int(last.Length)/2], 1<<20)
		rec, err := Recover(vfs.Default, dir, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.File.Close()
		if !rec.Scanned || !rec.TornTail || rec.Damage != nil || rec.DataEnd != int64(last.Offset) {
			t.Fatalf("scanned %v, torn %v, damage %v, data end %d (want %d)", rec.Scanned, rec.TornTail, rec.Damage, rec.DataEnd, last.Offset)
		}
		sameEntries(t, recEntries(t, rec), entries[:len(entries)-1])
		// Sealed now: a second recovery reads the footer it wrote.
		again, err := Recover(vfs.Default, dir, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		defer again.File.Close()
		if again.Scanned {
			t.Fatal("the recovered segment was not sealed")
		}
		sameEntries(t, recEntries(t, again), entries[:len(entries)-1])
	})
	for _, tc := range []struct {
		name      string
		header    []byte // written over the header block
		unwritten bool
	}{
		{"header never written", make([]byte, HeaderSize), true},
		{"header damaged", []byte("not a segment header"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := writeUnsealed(t, data, 1<<20)
			f, err := os.OpenFile(filepath.Join(dir, FileName(1)), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(tc.header, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			rec, err := Recover(vfs.Default, dir, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			defer rec.File.Close()
			if !rec.HeaderRepaired || rec.HeaderUnwritten != tc.unwritten || (rec.HeaderDamage != nil) == tc.unwritten {
				t.Fatalf("repaired %v, unwritten %v, damage %v", rec.HeaderRepaired, rec.HeaderUnwritten, rec.HeaderDamage)
			}
			sameEntries(t, recEntries(t, rec), entries)
		})
	}
}

// TestVerify: every record of a sealed segment checks out; a flipped value byte is one problem
// (a value checksum mismatch, a corruption) at that record's offset; an unsealed segment with a
// torn tail has no problem.
func TestVerify(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var recs []rec
	for _, r := range randomRecs(rng, 20, 3000) {
		if r.kind == record.KindPut && len(r.value) > 0 {
			recs = append(recs, r)
		}
	}
	data, entries, end := layout(recs)
	dir, a := writeUnsealed(t, data, 1<<20)
	if _, err := sealWith(a, entries, end); err != nil {
		t.Fatal(err)
	}
	victim := entries[len(entries)/2]
	name := filepath.Join(dir, FileName(1))
	f, size, err := OpenReadOnly(vfs.Default, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Verify(f, size)
	f.Close()
	if err != nil || v.Records != len(entries) || len(v.Problems) != 0 {
		t.Fatalf("clean segment: %d records of %d, problems %v, err %v", v.Records, len(entries), v.Problems, err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[int64(victim.Offset)+int64(victim.Length)-1] ^= 0x10 // the value's last byte
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, size, err = OpenReadOnly(vfs.Default, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err = Verify(f, size)
	if err != nil || v.Records != len(entries)-1 || len(v.Problems) != 1 ||
		v.Problems[0].Offset != int64(victim.Offset) || !errors.Is(v.Problems[0].Err, record.ErrValueChecksum) ||
		!errors.Is(v.Problems[0].Err, corruption.ErrCorrupt) {
		t.Fatalf("one flipped value byte: %d records, problems %v, err %v", v.Records, v.Problems, err)
	}
}

// TestReserve: placements go back to back from the header block, and one that would leave no
// room for the footer entries and trailer is refused without changing anything.
func TestReserve(t *testing.T) {
	const capacity = 64 << 10
	a, err := Create(vfs.Default, t.TempDir(), 1, capacity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if off, ok := a.Reserve(1000, 3); !ok || off != HeaderSize {
		t.Fatalf("first reservation at %d, %v", off, ok)
	}
	if off, ok := a.Reserve(500, 1); !ok || off != HeaderSize+1000 {
		t.Fatalf("second reservation at %d, %v", off, ok)
	}
	left := capacity - a.SealedSize() - EntrySize // room for one more record of one entry
	if a.Fits(left+1, 1) {
		t.Fatal("a record past the footer's room fits")
	}
	if _, ok := a.Reserve(left+1, 1); ok || a.End() != HeaderSize+1500 {
		t.Fatalf("a refused reservation moved the end to %d", a.End())
	}
	if off, ok := a.Reserve(left, 1); !ok || off != HeaderSize+1500 || a.SealedSize() != capacity {
		t.Fatalf("the last reservation at %d, %v; sealed size %d of %d", off, ok, a.SealedSize(), capacity)
	}

	// MaxRecordLen is exactly what an empty segment takes in one record.
	b, err := Create(vfs.Default, t.TempDir(), 2, capacity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := MaxRecordLen(capacity); b.Fits(n+1, 1) || !b.Fits(n, 1) {
		t.Fatalf("MaxRecordLen(%d) = %d: an empty segment fits %d: %v, %d: %v", capacity, n, n, b.Fits(n, 1), n+1, b.Fits(n+1, 1))
	}
}

// TestInspect: Inspect finds what Recover finds, without changing a byte of the file; a file
// with a segment's name that holds no record is Foreign, and neither touches it.
func TestInspect(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	recs := randomRecs(rng, 20, 3000)
	data, entries, _ := layout(recs)
	last := entries[len(entries)-1]
	dir, _ := writeUnsealed(t, data[:len(data)-int(last.Length)/2], 1<<20)
	name := filepath.Join(dir, FileName(1))
	// Damage the header too: Inspect reads past it, Recover repairs it.
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[3] ^= 0xff
	os.WriteFile(name, b, 0o644)

	ins, err := Inspect(vfs.Default, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	ins.File.Close()
	if after, _ := os.ReadFile(name); string(after) != string(b) {
		t.Fatal("Inspect changed the file")
	}
	if ins.HeaderRepaired || ins.HeaderDamage == nil || !ins.Scanned || !ins.TornTail {
		t.Fatalf("Inspect: repaired %v, damage %v, scanned %v, torn %v", ins.HeaderRepaired, ins.HeaderDamage, ins.Scanned, ins.TornTail)
	}
	rec, err := Recover(vfs.Default, dir, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	recovered := recEntries(t, rec) // read from the footer the scan wrote
	rec.File.Close()
	if !rec.HeaderRepaired {
		t.Fatal("Recover did not repair the header")
	}
	sameEntries(t, recEntries(t, ins), recovered)
	sameEntries(t, recEntries(t, ins), entries[:len(entries)-1])

	foreign := []byte("a file somebody else wrote, with a segment's name")
	os.WriteFile(filepath.Join(dir, FileName(2)), foreign, 0o644)
	for _, f := range []func() (*Recovered, error){
		func() (*Recovered, error) { return Inspect(vfs.Default, dir, 2) },
		func() (*Recovered, error) { return Recover(vfs.Default, dir, 2, false) },
	} {
		rec, err := f()
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Foreign || rec.File != nil {
			t.Fatalf("foreign file: %+v", rec)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, FileName(2))); string(after) != string(foreign) {
		t.Fatal("a foreign file was changed")
	}
}
