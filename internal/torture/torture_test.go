package torture

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, err := CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []Entry
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				e := Entry{Kind: PutBegin + Kind(i%int(maxKind-1)), Key: uint32(g), Version: uint64(i) << 40}
				mu.Lock()
				if err := l.Append(e); err != nil {
					t.Error(err)
				}
				want = append(want, e)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	got, err := ReadLog(path)
	if err != nil || len(got) != len(want) {
		t.Fatalf("ReadLog: %d entries, %v", len(got), err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// A torn last entry is dropped; damage before the end is an error.
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-5], 0o644)
	if got, err := ReadLog(path); err != nil || len(got) != len(want)-1 {
		t.Fatalf("torn log: %d entries, %v", len(got), err)
	}
	b[EntrySize+9] ^= 1
	os.WriteFile(path, b, 0o644)
	if got, err := ReadLog(path); !errors.Is(err, ErrCorrupt) || len(got) != 1 {
		t.Fatalf("damaged log: %d entries, %v", len(got), err)
	}
}

func TestDecodeChecks(t *testing.T) {
	var b [EntrySize]byte
	Entry{Kind: DelOK, Key: 7, Version: 9}.Encode(b[:])
	for _, tc := range []struct {
		name string
		mut  func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:EntrySize-1] }},
		{"kind zero", func(b []byte) []byte { b[0] = 0; return b }},
		{"kind unknown", func(b []byte) []byte { b[0] = byte(maxKind); return b }},
		{"reserved", func(b []byte) []byte { b[2] = 1; return b }},
		{"checksum", func(b []byte) []byte { b[9] ^= 0x80; return b }},
	} {
		c := b
		if _, err := Decode(tc.mut(c[:])); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if e, err := Decode(b[:]); err != nil || e != (Entry{Kind: DelOK, Key: 7, Version: 9}) {
		t.Fatalf("Decode = %+v, %v", e, err)
	}
}

func TestValue(t *testing.T) {
	for _, size := range []int{0, StampSize, StampSize + 1, 100, 4096, 20000} {
		v := Value(42, 7, size)
		if len(v) != max(size, StampSize) {
			t.Fatalf("size %d: %d bytes", size, len(v))
		}
		k, ver, err := ParseValue(v)
		if err != nil || k != 42 || ver != 7 {
			t.Fatalf("size %d: ParseValue = %d, %d, %v", size, k, ver, err)
		}
		step := 1
		if len(v) > 4096 {
			step = 97 // every byte of a large value costs a check of the whole value
		}
		for i := 0; i < len(v); i += step {
			w := bytes.Clone(v)
			w[i] ^= 0x20
			if k, ver, err := ParseValue(w); err == nil && k == 42 && ver == 7 {
				t.Fatalf("size %d: a flip at byte %d went unnoticed", size, i)
			}
		}
		if len(v) > StampSize {
			if _, _, err := ParseValue(v[:len(v)-1]); err == nil {
				t.Fatalf("size %d: a cut value went unnoticed", size)
			}
		}
	}
	if bytes.Equal(Value(1, 2, 64), Value(1, 3, 64)) || bytes.Equal(Value(1, 2, 64), Value(2, 2, 64)) {
		t.Fatal("values of different writes are equal")
	}
	for v := range uint64(200) {
		if n := ValueSize(3, v, 30000); n < StampSize || n > 30000 {
			t.Fatalf("ValueSize = %d", n)
		}
	}
}

// Small logs for the checker's tests.
func put(k uint32, v uint64) []Entry { return []Entry{{PutBegin, k, v}, {PutOK, k, v}} }
func del(k uint32, v uint64) []Entry { return []Entry{{DelBegin, k, v}, {DelOK, k, v}} }
func drain(n uint64) []Entry         { return []Entry{{DrainBegin, 0, n}, {DrainOK, 0, n}} }
func cat(parts ...[]Entry) []Entry {
	var out []Entry
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestHistory checks the rule of the package documentation on small logs.
func TestHistory(t *testing.T) {
	absent := State{}
	v := func(n uint64) State { return State{true, n} }
	for _, tc := range []struct {
		name     string
		log      []Entry
		delsSync bool
		base     State
		want     string // allowed states
	}{
		{"no ops", nil, false, v(3), "v3"},
		{"acked, not drained", put(1, 5), false, v(3), "v3 v5 absent"},
		{"drained", cat(put(1, 5), drain(6)), false, v(3), "v5"},
		{"drained then more", cat(put(1, 5), drain(6), put(1, 7), del(1, 8)), false, v(3), "v5 v7 absent"},
		{"begun only", []Entry{{PutBegin, 1, 5}}, false, absent, "absent v5"},
		{"failed put", []Entry{{PutBegin, 1, 5}, {PutFail, 1, 5}}, false, absent, "absent v5"},
		{"delete, fsync", cat(put(1, 5), del(1, 6)), true, v(3), "absent"},
		{"delete, no fsync", cat(put(1, 5), del(1, 6)), false, v(3), "v3 v5 absent"},
		{"drain begun before the ack", cat([]Entry{{PutBegin, 1, 5}, {DrainBegin, 0, 6}, {PutOK, 1, 5}, {DrainOK, 0, 6}}), false, v(3), "v3 v5 absent"},
		{"drain not returned", cat(put(1, 5), []Entry{{DrainBegin, 0, 6}}), false, v(3), "v3 v5 absent"},
		{"other key's ops", cat(put(2, 5), drain(6)), false, v(3), "v3"},
	} {
		h, err := NewHistory(tc.log, tc.delsSync)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, s := range h.Allowed(1, tc.base) {
			got = append(got, s.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: allowed %v, want %s", tc.name, got, tc.want)
		}
	}
	h, _ := NewHistory(cat(put(1, 5), drain(6), put(1, 7)), false)
	if err := h.Check(1, v(3), v(3), false); err == nil {
		t.Fatal("an older value was allowed")
	}
	if err := h.Check(1, v(3), absent, false); err != nil {
		t.Fatalf("a miss of drained data a newer acknowledged write replaced: %v", err)
	}
	if h, _ := NewHistory(cat(put(1, 5), drain(6)), false); h.Check(1, v(3), absent, false) == nil {
		t.Fatal("a miss of drained data was allowed")
	}
	if err := h.Check(1, v(3), absent, true); err != nil {
		t.Fatalf("a miss while evicting: %v", err)
	}
	if err := h.Check(1, v(3), v(3), true); err == nil {
		t.Fatal("an older value was allowed while evicting")
	}
	for _, bad := range [][]Entry{
		{{PutOK, 1, 5}},
		{{PutBegin, 1, 5}, {PutBegin, 1, 4}},
		{{PutBegin, 1, 5}, {DelOK, 1, 5}},
		{{DrainOK, 0, 1}},
	} {
		if _, err := NewHistory(bad, false); err == nil {
			t.Errorf("log %v accepted", bad)
		}
	}
}

// FuzzDecode: any bytes decode to whole entries that encode back to the same bytes, or to an
// error; never a panic.
func FuzzDecode(f *testing.F) {
	var b [EntrySize]byte
	Entry{Kind: PutOK, Key: 1, Version: 2}.Encode(b[:])
	f.Add(b[:])
	f.Add(b[:10])
	f.Add(append(b[:], b[:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeAll(data)
		if err == nil && len(entries)*EntrySize != len(data) {
			t.Fatalf("%d entries from %d bytes without an error", len(entries), len(data))
		}
		for i, e := range entries {
			var out [EntrySize]byte
			e.Encode(out[:])
			if !bytes.Equal(out[:], data[i*EntrySize:(i+1)*EntrySize]) {
				t.Fatalf("entry %d does not encode back to its bytes", i)
			}
		}
	})
}

// TestAllowedAfterCrash: after a crash of the process alone, no key reads older than its last
// acknowledged operation, drained or not.
func TestAllowedAfterCrash(t *testing.T) {
	absent := State{}
	v := func(n uint64) State { return State{true, n} }
	for _, tc := range []struct {
		name string
		log  []Entry
		base State
		want string
	}{
		{"acked, not drained", put(1, 5), v(3), "v5 absent"},
		{"drained", cat(put(1, 5), drain(6)), v(3), "v5"},
		{"drained, then acked", cat(put(1, 5), drain(6), put(1, 7)), v(3), "v7 absent"},
		{"acked, then begun", cat(put(1, 5), []Entry{{PutBegin, 1, 7}}), v(3), "v5 v7 absent"},
		{"drained, then begun", cat(put(1, 5), drain(6), []Entry{{PutBegin, 1, 7}}), v(3), "v5 v7 absent"},
		{"deleted", cat(put(1, 5), del(1, 6)), v(3), "absent"},
		{"nothing acked", []Entry{{PutBegin, 1, 5}}, v(3), "v3 v5 absent"},
		{"no ops", nil, v(3), "v3"},
		{"failed put after an ack", cat(put(1, 5), []Entry{{PutBegin, 1, 7}, {PutFail, 1, 7}}), absent, "v5 v7 absent"},
	} {
		h, err := NewHistory(tc.log, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, s := range h.AllowedAfterCrash(1, tc.base) {
			got = append(got, s.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: allowed %v, want %s", tc.name, got, tc.want)
		}
	}
	h, _ := NewHistory(cat(put(1, 5), drain(6), put(1, 7)), false)
	if err := h.CheckAfterCrash(1, v(3), v(5), false); err == nil {
		t.Fatal("after a crash, the drained value was allowed where a newer one was acknowledged")
	}
}
