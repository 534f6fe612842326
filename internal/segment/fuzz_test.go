package segment

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// segmentWith returns a segment file: a valid header block, then body.
func segmentWith(body []byte) *memFile {
	data := make([]byte, HeaderSize, HeaderSize+len(body))
	Header{Version: Version, ID: 1}.Encode(data)
	return &memFile{name: "fuzz.seg", data: append(data, body...)}
}

// FuzzScan feeds arbitrary bytes after a valid segment header to Scan: it
// must not panic, must hand over only records whose checksums hold, and
// must stop cleanly only at the end of the file or at a footer that
// ReadFooter accepts with the same entries. With repair set, the checksums
// of the records in body (as far as their lengths chain) and of a footer
// ending it are recomputed first, so the fuzzer gets past them.
func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds() {
		f.Add(s.body, false)
		f.Add(s.body, true)
	}
	f.Fuzz(func(t *testing.T, body []byte, repair bool) {
		if repair {
			body = repairSegment(bytes.Clone(body))
		}
		m := segmentWith(body)
		size := int64(len(m.data))
		var got scanned
		res := Scan(m, size, got.fn(t, m))
		if res.Records != len(got.entries) {
			t.Fatalf("Records = %d, fn called %d times", res.Records, len(got.entries))
		}
		if res.End < HeaderSize || res.End > size {
			t.Fatalf("End = %d outside [%d, %d]", res.End, HeaderSize, size)
		}
		next := int64(HeaderSize)
		for _, e := range got.entries {
			if int64(e.Offset) < next || int64(e.Offset)+int64(e.Length) > res.End {
				t.Fatalf("entry %+v out of order or past End %d", e, res.End)
			}
			next = int64(e.Offset) + int64(e.Length)
		}
		// Both only when damaged records were stepped over before a torn tail.
		if res.Torn && res.Err != nil && res.Skipped == 0 {
			t.Fatalf("both Torn and Err (%v) with nothing skipped", res.Err)
		}
		if res.Skipped != len(got.damaged) {
			t.Fatalf("Skipped = %d, fn was handed %d damaged records", res.Skipped, len(got.damaged))
		}
		if res.Torn || res.Err != nil || res.End == size {
			return
		}
		// A clean stop before the end of the file is a valid footer.
		entries, dataEnd, err := ReadFooter(m, size)
		if err != nil {
			t.Fatalf("Scan stopped cleanly at %d of %d but ReadFooter fails: %v", res.End, size, err)
		}
		if dataEnd != res.End {
			t.Fatalf("footer data end %d, Scan End %d", dataEnd, res.End)
		}
		sameEntries(t, entries, got.entries)
	})
}

// repairSegment recomputes the value and header checksums of the records in
// body, from its start for as long as their headers chain, then those of
// the footer trailer ending body, if there is one.
func repairSegment(body []byte) []byte {
	off := 0
	for off+record.LegacyHeaderSize <= len(body) {
		b := body[off:]
		hs := record.SizeAt(b)
		kind := record.Kind(b[2])
		keyLen := int64(binary.LittleEndian.Uint32(b[4:]))
		valueLen := int64(binary.LittleEndian.Uint32(b[8:]))
		var attrLen int64
		if hs > record.LegacyHeaderSize {
			if int64(len(b)) < hs {
				break
			}
			attrLen = int64(binary.LittleEndian.Uint32(b[52:]))
		}
		end := hs + keyLen + valueLen + attrLen
		if kind < record.KindPut || kind > record.KindPad || keyLen > record.MaxKeyLen || end > int64(len(b)) {
			break
		}
		crc := uint32(0)
		if kind != record.KindPad {
			crc = record.CRC(b[hs+keyLen : end-attrLen])
		}
		if attrLen > 0 {
			binary.LittleEndian.PutUint32(b[56:], record.CRC(b[end-attrLen:end]))
		}
		binary.LittleEndian.PutUint32(b[24:], crc)
		hcrc := record.CRC(b[:28])
		if hs > record.LegacyHeaderSize {
			hcrc = record.UpdateCRC(hcrc, b[record.LegacyHeaderSize:hs])
		}
		binary.LittleEndian.PutUint32(b[28:], record.UpdateCRC(hcrc, b[hs:hs+keyLen]))
		off += int(end)
	}
	if len(body) >= TrailerSize && bytes.HasPrefix(body[len(body)-TrailerSize:], []byte("BCFOOTR\x00")) {
		t := body[len(body)-TrailerSize:]
		n := int64(binary.LittleEndian.Uint32(t[12:])) * EntrySize
		if n <= int64(len(body)-TrailerSize) {
			binary.LittleEndian.PutUint32(t[24:], record.CRC(body[int64(len(body)-TrailerSize)-n:len(body)-TrailerSize]))
		}
		binary.LittleEndian.PutUint32(t[28:], record.CRC(t[:28]))
	}
	return body
}

type scanSeed struct {
	name string
	body []byte
}

func scanSeeds() []scanSeed {
	recs := []rec{
		{record.KindPut, []byte("alpha"), []byte("first value")},
		{record.KindDelete, []byte("beta"), nil},
		{record.KindPut, []byte("gamma"), bytes.Repeat([]byte("xyz"), 200)},
		{record.KindPut, nil, []byte("empty key")},
	}
	body, entries, end := layout(recs)
	pad := make([]byte, 64)
	record.EncodePad(pad)
	withPad := append(append([]byte(nil), body...), pad...)
	sealed := AppendFooter(append([]byte(nil), body...), entries, uint64(end))
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0x10
		return c
	}
	return []scanSeed{
		{"empty", nil},
		{"records", body},
		{"records_then_zeros", append(append([]byte(nil), body...), make([]byte, 600)...)},
		{"records_and_pad", withPad},
		{"sealed", sealed},
		{"sealed_cut_in_footer", sealed[:len(sealed)-7]},
		{"torn_last_record", body[:len(body)-5]},
		{"torn_header", body[:len(body)-len(recs[3].value)-record.HeaderSize+10]},
		{"flipped_header", flip(body, 3)},
		{"flipped_key", flip(body, record.HeaderSize+1)},
		{"flipped_value", flip(body, len(body)-1)},
		{"flipped_footer", flip(sealed, len(body)+2)},
		{"garbage", []byte("BC\x01\x00this is not a record at all, just some bytes")},
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus in testdata/fuzz")

// TestUpdateCorpus writes the seeds above as committed corpus files
// (go test -run TestUpdateCorpus -update-corpus).
func TestUpdateCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	var scan []codecSeed
	for _, s := range scanSeeds() {
		scan = append(scan, codecSeed{s.name, s.body})
	}
	for fuzzer, seeds := range map[string][]codecSeed{
		"FuzzScan":         scan,
		"FuzzDecodeHeader": headerSeeds(),
		"FuzzDecodeFooter": footerSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			for _, repair := range []bool{false, true} {
				data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", s.b, repair)
				name := "seed_" + s.name
				if repair {
					name += "_repaired"
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
