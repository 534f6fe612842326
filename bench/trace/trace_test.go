package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestOracleRoundTrip(t *testing.T) {
	reqs := []Request{{ID: 7, Size: 4096, Time: 1}, {ID: 1 << 40, Size: 512, Time: 2}, {ID: 7, Size: 4096, Time: 3}, {ID: 9, Size: 0, Time: 3}}
	var buf bytes.Buffer
	if err := WriteOracle(&buf, reqs); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != len(reqs)*OracleRecordSize {
		t.Fatalf("%d bytes, want %d", buf.Len(), len(reqs)*OracleRecordSize)
	}
	// The next access vtime of request 0 is request 2; the others are never asked again.
	b := buf.Bytes()
	for i, want := range []int64{2, -1, -1, -1} {
		got := int64(binary.LittleEndian.Uint64(b[i*24+16:]))
		if got != want {
			t.Errorf("request %d: next access vtime %d, want %d", i, got, want)
		}
	}
	got, err := ReadOracle(iotest.OneByteReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, reqs) {
		t.Fatalf("read back %v, want %v", got, reqs)
	}
	if _, err := ReadOracle(bytes.NewReader(b[:len(b)-5])); !errors.Is(err, ErrFormat) {
		t.Fatalf("torn file: error %v, want ErrFormat", err)
	}
	if _, err := ReadOracle(iotest.DataErrReader(bytes.NewReader(b))); err != nil {
		t.Fatalf("data with EOF: %v", err)
	}
}

func TestReadCSV(t *testing.T) {
	in := "key,size\nalpha,100\nbeta, 200\nalpha,100,extra\n\"g,amma\",0\n"
	got, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{{ID: 1, Size: 100, Time: 2}, {ID: 2, Size: 200, Time: 3}, {ID: 1, Size: 100, Time: 4}, {ID: 3, Size: 0, Time: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	s := Summarize(got)
	if s != (Summary{Requests: 3, ZeroSize: 1, Objects: 2, UniqueBytes: 300, RequestBytes: 400, MaxSize: 200}) {
		t.Fatalf("summary %+v", s)
	}
	for _, bad := range []string{"a,1\nb,x\n", "a\n", "a,1\nb,-1\n"} {
		if _, err := ReadCSV(strings.NewReader(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: error %v, want ErrFormat", bad, err)
		}
	}
}

func TestZipf(t *testing.T) {
	z := Zipf{Alpha: 1, Objects: 1000, Requests: 20000, SizeMin: 1024, SizeMax: 1 << 20, Seed: 3}
	a, err := z.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := z.Generate()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same parameters gave two traces")
	}
	counts := map[uint64]int{}
	sizes := map[uint64]uint32{}
	for _, r := range a {
		counts[r.ID]++
		if r.Size < 1024 || r.Size > 1<<20 {
			t.Fatalf("size %d outside the range", r.Size)
		}
		if s, ok := sizes[r.ID]; ok && s != r.Size {
			t.Fatalf("object %d has sizes %d and %d", r.ID, s, r.Size)
		}
		sizes[r.ID] = r.Size
	}
	// Alpha 1 over 1000 objects: rank 1 takes 1/H(1000) = 13.4% of requests, rank 2 half that.
	if c := counts[1]; c < 2400 || c > 3000 {
		t.Errorf("rank 1 drawn %d times of 20000, want about 2680", c)
	}
	if c := counts[2]; c < 1100 || c > 1600 {
		t.Errorf("rank 2 drawn %d times of 20000, want about 1340", c)
	}
	if err := (Zipf{Alpha: 0.8, Objects: 10, Requests: 10}).Validate(); err == nil {
		t.Error("size 0 accepted")
	}
}

// FuzzReadOracle: any bytes are a trace (24 bytes a record) or ErrFormat, and a trace read back
// from what WriteOracle writes of it is the same.
func FuzzReadOracle(f *testing.F) {
	var seed bytes.Buffer
	WriteOracle(&seed, []Request{{Time: 1, ID: 7, Size: 4096}, {Time: 2, ID: 7, Size: 4096}})
	f.Add(seed.Bytes())
	f.Add(seed.Bytes()[:30])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ReadOracle(bytes.NewReader(b))
		if len(b)%OracleRecordSize != 0 {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("%d bytes: err = %v, want ErrFormat", len(b), err)
			}
			return
		}
		if err != nil || len(reqs) != len(b)/OracleRecordSize {
			t.Fatalf("%d bytes: %d requests, %v", len(b), len(reqs), err)
		}
		var out bytes.Buffer
		if err := WriteOracle(&out, reqs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadOracle(&out)
		if err != nil || !slices.Equal(again, reqs) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzReadCSV: any bytes are a trace or ErrFormat; every request's id is numbered from 1 in
// order of first appearance.
func FuzzReadCSV(f *testing.F) {
	f.Add([]byte("key,size\na,100\nb,200\na,100\n"))
	f.Add([]byte("a,1,extra\n\"q\"\"x\",2\n"))
	f.Add([]byte("a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, err := ReadCSV(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			return
		}
		var top uint64
		for i, r := range reqs {
			if r.ID == 0 || r.ID > top+1 {
				t.Fatalf("request %d: id %d after ids up to %d", i, r.ID, top)
			}
			top = max(top, r.ID)
		}
	})
}
