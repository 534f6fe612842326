package segment

import (
	"github.com/seed57392e9e/blobcache/internal/corruption"

	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

func TestFileName(t *testing.T) {
	for _, tc := range []struct {
		id   uint32
		name string
	}{
		{0, "0000000000.seg"},
		{1, "0000000001.seg"},
		{1234567890, "1234567890.seg"},
		{4294967295, "4294967295.seg"},
	} {
		if got := FileName(tc.id); got != tc.name {
			t.Errorf("FileName(%d) = %q, want %q", tc.id, got, tc.name)
		}
		if id, ok := ParseFileName(tc.name); !ok || id != tc.id {
			t.Errorf("ParseFileName(%q) = %d, %v", tc.name, id, ok)
		}
	}
	for _, name := range []string{
		"", ".seg", "1.seg", "000000001.seg", "00000000001.seg", "4294967296.seg", "9999999999.seg",
		"000000000a.seg", "-000000001.seg", "+000000001.seg", "0000000001.SEG", "0000000001.seg.tmp",
		"0000000001", "dir/0000000001.seg", "bloom.dat",
	} {
		if id, ok := ParseFileName(name); ok {
			t.Errorf("ParseFileName(%q) = %d, true; want false", name, id)
		}
	}
}

func TestCreateWriteSealRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, opts := range []Options{{}, {Sync: true}} {
		dir := t.TempDir()
		const capacity = 4 << 20
		a, err := Create(vfs.Default, dir, 7, capacity, opts)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID() != 7 {
			t.Fatalf("ID = %d", a.ID())
		}
		if size := fileSize(t, a.File()); size != FirstAllocation(capacity) || size != capacity/2 {
			t.Fatalf("size after Create = %d, want the preallocated first half, %d", size, capacity/2)
		}
		if _, err := Create(vfs.Default, dir, 7, capacity, opts); err == nil {
			t.Fatal("Create of an existing segment succeeded")
		}

		// Eight batches reserved back to back, written concurrently.
		const batches = 8
		var all []rec
		var offs []int64
		var bufs [][][]byte
		off := int64(HeaderSize)
		for range batches {
			recs := randomRecs(rng, 1+rng.IntN(20), 3000)
			var batch [][]byte
			for _, r := range recs {
				batch = append(batch, r.encode())
			}
			offs = append(offs, off)
			bufs = append(bufs, batch)
			for _, b := range batch {
				off += int64(len(b))
			}
			all = append(all, recs...)
		}
		_, wantEntries, dataEnd := layout(all)
		if dataEnd != off {
			t.Fatalf("layout end %d != reserved end %d", dataEnd, off)
		}
		var wg sync.WaitGroup
		for i := range batches {
			wg.Go(func() {
				if err := a.WriteBatch(bufs[i], offs[i]); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()

		// Readers see the records while the segment is active.
		var before scanned
		res := Scan(a.File(), fileSize(t, a.File()), before.fn(t, a.File()))
		if res.Err != nil || !res.Torn || res.End != dataEnd || res.Records != len(all) {
			t.Fatalf("Scan of the active segment = %+v, want End %d, %d records, Torn", res, dataEnd, len(all))
		}
		sameEntries(t, before.entries, wantEntries)

		size, err := sealWith(a, wantEntries, dataEnd)
		if err != nil {
			t.Fatal(err)
		}
		if want := dataEnd + FooterSize(len(wantEntries)); size != want || fileSize(t, a.File()) != want {
			t.Fatalf("Seal size %d, file size %d, want %d", size, fileSize(t, a.File()), want)
		}
		if err := a.WriteBatch(bufs[0], dataEnd); !errors.Is(err, ErrSealed) {
			t.Fatalf("WriteBatch after Seal = %v, want ErrSealed", err)
		}
		if _, err := sealWith(a, wantEntries, dataEnd); !errors.Is(err, ErrSealed) {
			t.Fatalf("second Seal = %v, want ErrSealed", err)
		}
		// File stays readable after Seal.
		for i, e := range wantEntries {
			b := make([]byte, e.Length)
			if _, err := a.File().ReadAt(b, int64(e.Offset)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, all[i].encode()) {
				t.Fatalf("record %d reads back different bytes", i)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}

		f, gotSize, err := Open(vfs.Default, dir, 7)
		if err != nil {
			t.Fatal(err)
		}
		if gotSize != size {
			t.Fatalf("Open size = %d, want %d", gotSize, size)
		}
		entries, gotEnd, err := ReadFooter(f, gotSize)
		if err != nil {
			t.Fatal(err)
		}
		if gotEnd != dataEnd {
			t.Fatalf("ReadFooter dataEnd = %d, want %d", gotEnd, dataEnd)
		}
		sameEntries(t, entries, wantEntries)

		// A sealed segment scans to its footer and stops there cleanly.
		var after scanned
		res = Scan(f, gotSize, after.fn(t, f))
		if res != (ScanResult{End: dataEnd, Records: len(all)}) {
			t.Fatalf("Scan of the sealed segment = %+v, want End %d, %d records, clean", res, dataEnd, len(all))
		}
		sameEntries(t, after.entries, wantEntries)
		f.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(vfs.Default, dir, 3, 64<<10, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, _, err := Open(vfs.Default, dir, 4); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a missing segment = %v", err)
	}
	// The header names segment 3, the file name segment 4.
	if err := os.Rename(filepath.Join(dir, FileName(3)), filepath.Join(dir, FileName(4))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(vfs.Default, dir, 4); !errors.Is(err, corruption.ErrCorrupt) {
		t.Fatalf("Open of a renamed segment = %v, want corruption.ErrCorrupt", err)
	}
	name := filepath.Join(dir, FileName(4))
	for _, tc := range []struct {
		name   string
		damage func() error
		want   error
	}{
		{"flipped header", func() error { return flipByte(name, 17) }, ErrHeaderChecksum},
		{"flipped magic", func() error { return flipByte(name, 2) }, ErrBadMagic},
		{"short", func() error { return os.Truncate(name, 100) }, record.ErrTruncated},
	} {
		if err := tc.damage(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Open(vfs.Default, dir, 4); !errors.Is(err, corruption.ErrCorrupt) || !errors.Is(err, tc.want) {
			t.Fatalf("%s: Open = %v, want corruption.ErrCorrupt and %v", tc.name, err, tc.want)
		}
	}
}

func flipByte(name string, off int64) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	b[0] ^= 0x10
	_, err = f.WriteAt(b, off)
	return err
}

func TestScanUnsealed(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	recs := randomRecs(rng, 50, 2000)
	data, want, end := layout(recs)
	dir, a := writeUnsealed(t, data, 1<<20)
	a.Close()

	f, size, err := Open(vfs.Default, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := ReadFooter(f, size); !errors.Is(err, ErrNoFooter) {
		t.Fatalf("ReadFooter of an unsealed segment = %v, want ErrNoFooter", err)
	}
	var got scanned
	res := Scan(f, size, got.fn(t, f))
	if res != (ScanResult{End: end, Records: len(recs), Torn: true}) {
		t.Fatalf("Scan = %+v, want End %d, %d records, Torn (zeros up to the preallocated size)", res, end, len(recs))
	}
	sameEntries(t, got.entries, want)
	for i := range recs {
		if !bytes.Equal(got.keys[i], recs[i].key) {
			t.Fatalf("key %d = %q, want %q", i, got.keys[i], recs[i].key)
		}
	}

	// A file that ends exactly after its last record stops cleanly.
	if err := f.Truncate(end); err != nil {
		t.Fatal(err)
	}
	res = Scan(f, end, func(Entry, record.Header, []byte) error { return nil })
	if res != (ScanResult{End: end, Records: len(recs)}) {
		t.Fatalf("Scan of a file ending after its last record = %+v", res)
	}

	// An empty segment: nothing but the header block.
	if err := f.Truncate(HeaderSize); err != nil {
		t.Fatal(err)
	}
	res = Scan(f, HeaderSize, nil)
	if res != (ScanResult{End: HeaderSize}) {
		t.Fatalf("Scan of an empty segment = %+v", res)
	}
	res = Scan(f, 100, nil)
	if !errors.Is(res.Err, corruption.ErrCorrupt) {
		t.Fatalf("Scan of a file shorter than its header = %+v", res)
	}
}

func TestScanPadsAndLargeValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	big := make([]byte, 3*scanBufSize+12345) // larger than Scan's buffer
	for i := range big {
		big[i] = byte(rng.IntN(255) + 1)
	}
	pad := func(n int) []byte { b := make([]byte, n); record.EncodePad(b); return b }
	recs := []rec{
		{record.KindPut, []byte("small"), []byte("v")},
		{record.KindPut, []byte("big"), big},
		{record.KindDelete, []byte("gone"), nil},
		{record.KindPut, bytes.Repeat([]byte("k"), record.MaxKeyLen), []byte("longest key")},
	}
	var data []byte
	var want []Entry
	for i, r := range recs {
		b := r.encode()
		want = append(want, Entry{Hash: record.KeyHash(r.key), Offset: uint32(HeaderSize + len(data)), Length: uint32(len(b)), Kind: r.kind})
		data = append(data, b...)
		data = append(data, pad(record.HeaderSize+i*1000)...)
	}
	dir, a := writeUnsealed(t, data, 16<<20)
	_ = dir
	f := a.File()
	var got scanned
	res := Scan(f, fileSize(t, f), got.fn(t, f))
	end := HeaderSize + int64(len(data))
	if res != (ScanResult{End: end, Records: len(recs), Torn: true}) {
		t.Fatalf("Scan = %+v, want End %d (pads included), %d records", res, end, len(recs))
	}
	sameEntries(t, got.entries, want)

	// A flip near the end of the big value, past the first buffer.
	bigOff := int64(want[1].Offset)
	if _, err := f.WriteAt([]byte{big[len(big)-10] ^ 0x01}, bigOff+int64(want[1].Length)-10); err != nil {
		t.Fatal(err)
	}
	// The record's header checks, so the scan steps over it and keeps the ones after it.
	res = Scan(f, fileSize(t, f), func(Entry, record.Header, []byte) error { return nil })
	if res.Records != len(recs)-1 || res.Skipped != 1 {
		t.Fatalf("Scan after a flip in the big value: %d records, %d skipped; want %d and 1", res.Records, res.Skipped, len(recs)-1)
	}
	wantCorruptionAt(t, res, f.Name(), bigOff, record.ErrValueChecksum)
}

func TestScanCallbackError(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	recs := randomRecs(rng, 5, 100)
	data, entries, _ := layout(recs)
	_, a := writeUnsealed(t, data, 1<<20)
	errStop := errors.New("stop here")
	calls := 0
	res := Scan(a.File(), fileSize(t, a.File()), func(Entry, record.Header, []byte) error {
		calls++
		if calls == 3 {
			return errStop
		}
		return nil
	})
	if res.Err != errStop || res.Records != 2 || res.End != int64(entries[2].Offset) || res.Torn {
		t.Fatalf("Scan = %+v, want fn's error, 2 records, End %d", res, entries[2].Offset)
	}
}

// TestTornTail cuts the last record at every byte: the file ends there, as
// it does when the file system does not preallocate.
func TestTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	recs := randomRecs(rng, 10, 700)
	recs[len(recs)-1] = rec{record.KindPut, []byte("last key"), bytes.Repeat([]byte{0xa5}, 1500)}
	data, entries, end := layout(recs)
	last := entries[len(entries)-1]
	_, a := writeUnsealed(t, data, HeaderSize)
	f := a.File()
	for cut := end - 1; cut > int64(last.Offset); cut-- {
		if err := f.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		var got scanned
		res := Scan(f, cut, got.fn(t, f))
		if res != (ScanResult{End: int64(last.Offset), Records: len(recs) - 1, Torn: true}) {
			t.Fatalf("cut at %d: Scan = %+v, want End %d, %d records, Torn", cut, res, last.Offset, len(recs)-1)
		}
		sameEntries(t, got.entries, entries[:len(entries)-1])
	}
}

// TestTornSectors zeroes sectors of the last record in a preallocated file,
// as a crash leaves writes that did not reach the disk.
func TestTornSectors(t *testing.T) {
	key := bytes.Repeat([]byte{'k'}, 1000) // the key spans sectors too
	value := bytes.Repeat([]byte{0x5a}, 5000)
	recs := append(randomRecs(rand.New(rand.NewPCG(6, 6)), 7, 300), rec{record.KindPut, key, value})
	data, entries, end := layout(recs)
	last := int64(entries[len(entries)-1].Offset)
	_, a := writeUnsealed(t, nil, 1<<20)
	f := a.File()
	size := fileSize(t, f)
	check := func(what string) {
		t.Helper()
		res := Scan(f, size, func(Entry, record.Header, []byte) error { return nil })
		if res != (ScanResult{End: last, Records: len(recs) - 1, Torn: true}) {
			t.Fatalf("%s: Scan = %+v, want End %d, %d records, Torn", what, res, last, len(recs)-1)
		}
	}
	// Everything from a sector boundary inside the last record on is zero.
	for cut := last; cut < end; cut++ {
		if cut != last && cut%sectorSize != 0 {
			continue
		}
		if _, err := f.WriteAt(data, HeaderSize); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, end-cut), cut); err != nil {
			t.Fatal(err)
		}
		check("zeros from " + itoa(cut))
	}
	// One sector in the middle did not reach the disk; the rest did.
	for s := (last/sectorSize + 1) * sectorSize; s+sectorSize <= end; s += sectorSize {
		if _, err := f.WriteAt(data, HeaderSize); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, sectorSize), s); err != nil {
			t.Fatal(err)
		}
		check("zero sector at " + itoa(s))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCorruption flips one bit at a time in the header, key and value of a
// record in the middle: Scan must stop there with a corruption error, not a
// torn tail, and keep the records before it.
func TestCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	recs := randomRecs(rng, 9, 500)
	recs[4] = rec{record.KindPut, []byte("the victim"), bytes.Repeat([]byte{0x77}, 900)}
	data, entries, _ := layout(recs)
	victim := int64(entries[4].Offset)
	keyOff := victim + record.HeaderSize
	valueOff := keyOff + int64(len(recs[4].key))
	_, a := writeUnsealed(t, data, 1<<20)
	f := a.File()
	size := fileSize(t, f)
	for _, tc := range []struct {
		name string
		off  int64
		bit  byte
		want error
	}{
		{"magic", victim, 0x01, record.ErrBadMagic},
		{"kind", victim + 2, 0x04, record.ErrBadKind},
		{"kind to pad", victim + 2, 0x02, record.ErrBadLength},
		{"flags", victim + 3, 0x01, record.ErrHeaderChecksum},
		{"key length", victim + 4, 0x02, record.ErrHeaderChecksum},
		{"key length too big", victim + 5, 0x80, record.ErrBadLength},
		{"value length", victim + 8, 0x01, record.ErrHeaderChecksum},
		{"value length high", victim + 11, 0x40, record.ErrHeaderChecksum},
		{"sum", victim + 12, 0x01, record.ErrHeaderChecksum},
		{"ctime", victim + 20, 0x08, record.ErrHeaderChecksum},
		{"value crc", victim + 24, 0x01, record.ErrHeaderChecksum},
		{"header crc", victim + 31, 0x80, record.ErrHeaderChecksum},
		{"key first byte", keyOff, 0x01, record.ErrHeaderChecksum},
		{"key last byte", valueOff - 1, 0x20, record.ErrHeaderChecksum},
		{"value first byte", valueOff, 0x01, record.ErrValueChecksum},
		{"value last byte", int64(entries[5].Offset) - 1, 0x80, record.ErrValueChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.WriteAt(data, HeaderSize); err != nil {
				t.Fatal(err)
			}
			b := []byte{data[tc.off-HeaderSize] ^ tc.bit}
			if _, err := f.WriteAt(b, tc.off); err != nil {
				t.Fatal(err)
			}
			var got scanned
			res := Scan(f, size, got.fn(t, f))
			if errors.Is(tc.want, record.ErrValueChecksum) {
				// A damaged value under a good header is stepped over.
				if res.Records != len(entries)-1 || res.Skipped != 1 {
					t.Fatalf("Scan: %d records, %d skipped; want all %d but the damaged one", res.Records, res.Skipped, len(entries)-1)
				}
				sameEntries(t, got.entries, append(append([]Entry(nil), entries[:4]...), entries[5:]...))
				if len(got.damaged) != 1 || got.damaged[0].Offset != uint32(victim) {
					t.Fatalf("damaged records handed over: %+v, want the one at %d", got.damaged, victim)
				}
				wantCorruptionAt(t, res, f.Name(), victim, tc.want)
				return
			}
			if res.Records != 4 {
				t.Fatalf("Scan handed over %d records, want the 4 before the flip", res.Records)
			}
			sameEntries(t, got.entries, entries[:4])
			wantCorruption(t, res, f.Name(), victim, tc.want)
		})
	}
}

// TestSealCrash cuts a sealed segment at every byte of its footer, as a
// crash during Seal can leave it: ReadFooter must fail cleanly and Scan
// must recover every record and call the partial footer a torn tail.
func TestSealCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	recs := randomRecs(rng, 60, 50) // enough entries for a footer over several sectors
	data, entries, dataEnd := layout(recs)
	dir, a := writeUnsealed(t, data, 1<<20)
	size, err := sealWith(a, entries, dataEnd)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	f, _, err := Open(vfs.Default, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	footer := make([]byte, size-dataEnd)
	if _, err := f.ReadAt(footer, dataEnd); err != nil {
		t.Fatal(err)
	}

	scan := func(what string, size int64, torn bool) {
		t.Helper()
		var got scanned
		res := Scan(f, size, got.fn(t, f))
		if res != (ScanResult{End: dataEnd, Records: len(recs), Torn: torn}) {
			t.Fatalf("%s: Scan = %+v, want End %d, %d records, Torn %v", what, res, dataEnd, len(recs), torn)
		}
		sameEntries(t, got.entries, entries)
	}
	readFooterFails := func(what string, size int64) {
		t.Helper()
		_, _, err := ReadFooter(f, size)
		if err == nil {
			t.Fatalf("%s: ReadFooter succeeded", what)
		}
		if !errors.Is(err, ErrNoFooter) && !errors.Is(err, corruption.ErrCorrupt) {
			t.Fatalf("%s: ReadFooter = %v, want ErrNoFooter or corruption.ErrCorrupt", what, err)
		}
	}

	// The file ends part way through the footer.
	for cut := size - 1; cut >= dataEnd; cut-- {
		if err := f.Truncate(cut); err != nil {
			t.Fatal(err)
		}
		what := "cut at " + itoa(cut)
		readFooterFails(what, cut)
		scan(what, cut, cut > dataEnd)
	}

	// The whole footer was written but the truncate did not happen: the
	// preallocated zeros follow it.
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(footer, dataEnd); err != nil {
		t.Fatal(err)
	}
	readFooterFails("not truncated", 1<<20)
	scan("not truncated", 1<<20, true)

	// The file was truncated but sectors of the footer never reached the
	// disk.
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for s := dataEnd - dataEnd%sectorSize; s < size; s += sectorSize {
		if _, err := f.WriteAt(footer, dataEnd); err != nil {
			t.Fatal(err)
		}
		from, to := max(s, dataEnd), min(s+sectorSize, size)
		if _, err := f.WriteAt(make([]byte, to-from), from); err != nil {
			t.Fatal(err)
		}
		what := "zero footer sector at " + itoa(s)
		readFooterFails(what, size)
		scan(what, size, true)
	}

	// A flipped byte in the footer is corruption of the footer, and Scan
	// does not take it for a torn seal.
	if _, err := f.WriteAt(footer, dataEnd); err != nil {
		t.Fatal(err)
	}
	if err := flipByte(f.Name(), dataEnd+3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadFooter(f, size); !errors.Is(err, ErrFooterChecksum) {
		t.Fatalf("ReadFooter with a flipped entry = %v, want ErrFooterChecksum", err)
	}
	res := Scan(f, size, func(Entry, record.Header, []byte) error { return nil })
	if res.Torn || !errors.Is(res.Err, corruption.ErrCorrupt) || res.End != dataEnd || res.Records != len(recs) {
		t.Fatalf("Scan with a flipped footer = %+v, want corruption at %d after %d records", res, dataEnd, len(recs))
	}
}

func TestReadFooterErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	recs := randomRecs(rng, 5, 50)
	data, entries, dataEnd := layout(recs)
	footerFor := func(entries []Entry, dataEnd int64) []byte {
		return AppendFooter(nil, entries, uint64(dataEnd))
	}
	overlapping := append([]Entry(nil), entries...)
	overlapping[2].Offset--
	for _, tc := range []struct {
		name   string
		footer []byte
		at     int64
		want   error
	}{
		{"data end not where the footer starts", footerFor(entries, dataEnd-1), dataEnd, record.ErrBadLength},
		{"overlapping entries", footerFor(overlapping, dataEnd), dataEnd, record.ErrBadLength},
		{"entry past data end", footerFor(entries, int64(entries[4].Offset)+10), int64(entries[4].Offset) + 10, record.ErrBadLength},
		{"data end inside the header block", footerFor(make([]Entry, 250), 100), 100, record.ErrBadLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &memFile{name: "mem.seg", data: make([]byte, HeaderSize)}
			f.WriteAt(data, HeaderSize)
			f.Truncate(tc.at)
			f.WriteAt(tc.footer, tc.at)
			_, _, err := ReadFooter(f, int64(len(f.data)))
			if !errors.Is(err, corruption.ErrCorrupt) || !errors.Is(err, tc.want) {
				t.Fatalf("ReadFooter = %v, want corruption.ErrCorrupt and %v", err, tc.want)
			}
		})
	}
	if _, _, err := ReadFooter(&memFile{name: "short", data: make([]byte, 10)}, 10); !errors.Is(err, ErrNoFooter) {
		t.Fatalf("ReadFooter of a short file = %v", err)
	}
}

func TestWriteFooterRejectsBadEntries(t *testing.T) {
	good := []Entry{{Hash: 1, Offset: HeaderSize, Length: 40, Kind: record.KindPut}}
	for _, tc := range []struct {
		name    string
		entries []Entry
		dataEnd int64
	}{
		{"data end in header", nil, 10},
		{"entry past data end", good, HeaderSize + 39},
		{"pad entry", []Entry{{Hash: 1, Offset: HeaderSize, Length: 40, Kind: record.KindPad}}, HeaderSize + 40},
		{"entry in header block", []Entry{{Hash: 1, Offset: 0, Length: 40, Kind: record.KindPut}}, HeaderSize + 40},
		{"out of order", append(append([]Entry(nil), good...), good...), HeaderSize + 80},
	} {
		f := &memFile{name: "mem.seg", data: make([]byte, HeaderSize+100)}
		if _, err := WriteFooter(f, tc.entries, tc.dataEnd, false); err == nil {
			t.Errorf("%s: WriteFooter succeeded", tc.name)
		}
		if len(f.data) != HeaderSize+100 {
			t.Errorf("%s: WriteFooter wrote before checking", tc.name)
		}
	}
}

func TestWriteBatchErrors(t *testing.T) {
	_, a := writeUnsealed(t, nil, 64<<10)
	if err := a.WriteBatch([][]byte{[]byte("x")}, 100); err == nil {
		t.Error("WriteBatch over the header block succeeded")
	}
	if err := a.WriteBatch([][]byte{[]byte("x")}, MaxSize); err == nil {
		t.Error("WriteBatch past MaxSize succeeded")
	}
	if _, err := Create(vfs.Default, t.TempDir(), 1, 100, Options{}); err == nil {
		t.Error("Create with a capacity smaller than the header block succeeded")
	}
}

// padBatch encodes recs into one aligned buffer for offset off, padded to a
// multiple of 4096 with one pad record, and returns it with the entries.
func padBatch(recs []rec, off int64) ([]byte, []Entry) {
	var raw []byte
	var entries []Entry
	for _, r := range recs {
		b := r.encode()
		entries = append(entries, Entry{Hash: record.KeyHash(r.key), Offset: uint32(off + int64(len(raw))), Length: uint32(len(b)), Kind: r.kind})
		raw = append(raw, b...)
	}
	n := len(raw) + record.HeaderSize // room for at least a pad header
	buf := vfs.AlignedBuffer(n)
	copy(buf, raw)
	record.EncodePad(buf[len(raw):])
	return buf, entries
}

func TestDirect(t *testing.T) {
	dir := t.TempDir()
	a, err := Create(vfs.Default, dir, 9, 4<<20, Options{Direct: true, Sync: true})
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("the file system of %s returned EINVAL for O_DIRECT: %v", dir, err)
	}
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	rng := rand.New(rand.NewPCG(10, 10))
	var all []Entry
	var bufs [][]byte
	var offs []int64
	off := int64(HeaderSize)
	for range 6 {
		buf, entries := padBatch(randomRecs(rng, 1+rng.IntN(10), 2000), off)
		bufs = append(bufs, buf)
		offs = append(offs, off)
		all = append(all, entries...)
		off += int64(len(buf))
	}
	dataEnd := off
	var wg sync.WaitGroup
	for i := range bufs {
		wg.Go(func() {
			if err := a.WriteBatch([][]byte{bufs[i]}, offs[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	for _, tc := range []struct {
		name string
		bufs [][]byte
		off  int64
	}{
		{"two buffers", [][]byte{bufs[0], bufs[1]}, dataEnd},
		{"unaligned offset", [][]byte{bufs[0]}, dataEnd + 512},
		{"unaligned length", [][]byte{bufs[0][:100]}, dataEnd},
		{"unaligned memory", [][]byte{vfs.AlignedBuffer(8192)[1:4097]}, dataEnd},
	} {
		if err := a.WriteBatch(tc.bufs, tc.off); !errors.Is(err, ErrMisaligned) {
			t.Errorf("%s: WriteBatch = %v, want ErrMisaligned", tc.name, err)
		}
	}

	var got scanned
	res := Scan(a.File(), fileSize(t, a.File()), got.fn(t, a.File()))
	if res != (ScanResult{End: dataEnd, Records: len(all), Torn: true}) {
		t.Fatalf("Scan of the active direct segment = %+v, want End %d, %d records", res, dataEnd, len(all))
	}
	sameEntries(t, got.entries, all)

	size, err := sealWith(a, all, dataEnd)
	if err != nil {
		t.Fatal(err)
	}
	if a.direct != nil {
		t.Fatal("Seal left the direct descriptor open")
	}
	f, gotSize, err := Open(vfs.Default, dir, 9)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if gotSize != size {
		t.Fatalf("size %d, want %d", gotSize, size)
	}
	hdr := make([]byte, HeaderLen)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	if h, err := DecodeHeader(hdr); err != nil || h.Flags&FlagDirect == 0 || h.ID != 9 {
		t.Fatalf("segment header = %+v, %v; want the direct flag and id 9", h, err)
	}
	entries, gotEnd, err := ReadFooter(f, gotSize)
	if err != nil {
		t.Fatal(err)
	}
	if gotEnd != dataEnd {
		t.Fatalf("dataEnd %d, want %d", gotEnd, dataEnd)
	}
	sameEntries(t, entries, all)
}

// TestScanStepsOverFreedRecords: a record whose blocks the cache punched out (it was
// overwritten or deleted) is stepped over silently, and the records after it are kept.
func TestScanStepsOverFreedRecords(t *testing.T) {
	recs := []rec{
		{record.KindPut, []byte("a"), bytes.Repeat([]byte{1}, 100)},
		{record.KindPut, []byte("freed"), bytes.Repeat([]byte{2}, 40<<10)},
		{record.KindPut, []byte("c"), bytes.Repeat([]byte{3}, 100)},
	}
	data, entries, end := layout(recs)
	_, a := writeUnsealed(t, data, 1<<20)
	f := a.File()
	const block = vfs.DirectIOAlignment
	from := (int64(entries[1].Offset) + record.HeaderSize + record.MaxKeyLen + block - 1) / block * block
	to := (int64(entries[1].Offset) + int64(entries[1].Length)) / block * block
	if err := f.PunchHole(from, to-from); err != nil {
		t.Fatal(err)
	}
	var got scanned
	res := Scan(f, fileSize(t, f), got.fn(t, f))
	if res.Records != 2 || res.Skipped != 0 || res.Err != nil || res.End != end {
		t.Fatalf("Scan = %+v, want 2 records, nothing skipped, End %d", res, end)
	}
	sameEntries(t, got.entries, []Entry{entries[0], entries[2]})
}

// TestGrow: a segment is created with the first half of its capacity preallocated, and Grow
// preallocates the rest once what is placed passes that half, once.
func TestGrow(t *testing.T) {
	const capacity = 1 << 20
	a, err := Create(vfs.Default, t.TempDir(), 1, capacity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Allocated() != capacity/2 {
		t.Fatalf("Allocated after Create = %d, want %d", a.Allocated(), capacity/2)
	}
	if _, ok := a.Reserve(capacity/2-HeaderSize-EntrySize-TrailerSize, 1); !ok {
		t.Fatal("Reserve up to the first half failed")
	}
	if n, err := a.Grow(); n != 0 || err != nil {
		t.Fatalf("Grow at the first half = %d, %v; want 0", n, err)
	}
	if _, ok := a.Reserve(1, 1); !ok {
		t.Fatal("Reserve past the first half failed")
	}
	if n, err := a.Grow(); n != capacity/2 || err != nil {
		t.Fatalf("Grow past the first half = %d, %v; want %d", n, err, capacity/2)
	}
	if size := fileSize(t, a.File()); size != capacity || a.Allocated() != capacity {
		t.Fatalf("after Grow: size %d, Allocated %d; want %d", size, a.Allocated(), capacity)
	}
	if n, err := a.Grow(); n != 0 || err != nil {
		t.Fatalf("Grow again = %d, %v; want 0", n, err)
	}
}
