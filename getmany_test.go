package blobcache

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestGetMany: every held key is handed over once, in key order, with its bytes; misses,
// deleted keys and invalid keys are not; fn's error stops the lookups.
func TestGetMany(t *testing.T) {
	c := open(t, t.TempDir(), small()...)
	defer c.Close()
	var keys [][]byte
	for i := range 300 {
		k := fmt.Appendf(nil, "k%d", i)
		keys = append(keys, k)
		if i%3 == 0 {
			c.Put(k, k)
		}
	}
	c.Delete([]byte("k3"))
	keys = append(keys, nil, make([]byte, MaxKeyLen+1))
	var got []int
	err := c.GetMany(keys, func(i int, r *Reader) error {
		v, err := io.ReadAll(r)
		if err != nil || string(v) != string(keys[i]) {
			t.Fatalf("key %q: %q, %v", keys[i], v, err)
		}
		got = append(got, i)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 99 {
		t.Fatalf("%d hits, want 99", len(got))
	}
	for j, i := range got {
		if i%3 != 0 || i == 3 || j > 0 && got[j-1] >= i {
			t.Fatalf("hits %v", got)
		}
	}
	// MayContain never says no to a held key, and the filter turns most misses away.
	may := make([]bool, len(keys))
	c.MayContain(keys, may)
	no := 0
	for i := range keys {
		switch {
		case i < 300 && i%3 == 0 && i != 3 && !may[i]:
			t.Fatalf("MayContain said no to held key %q", keys[i])
		case !may[i]:
			no++
		}
	}
	if no < 150 || may[300] || may[301] {
		t.Fatalf("MayContain turned %d of 203 misses away (invalid keys: %v, %v)", no, may[300], may[301])
	}
	stop := errors.New("stop")
	n := 0
	if err := c.GetMany(keys, func(int, *Reader) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("GetMany = %v after %d calls, want stop after 1", err, n)
	}
}
