package blobcache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// stamped values carry their key and version in their first bytes, so a reader can tell which
// Put a value came from and check every byte of it.
func stamped(key string, version uint32, size int) []byte {
	v := value(key, int(version), max(size, 4))
	binary.LittleEndian.PutUint32(v, version)
	return v
}

func versionOf(v []byte) uint32 { return binary.LittleEndian.Uint32(v) }

// TestConcurrentHistory runs writers, deleters, readers, drains, bloom rebuilds and eviction at
// once (run it under -race). Each key has one writer, which records the versions it put; a
// reader must only ever see a value that is byte for byte one of them, and never an older
// version than one it saw before for the same key.
func TestConcurrentHistory(t *testing.T) {
	for _, opts := range [][]Option{
		small(WithMaxSize(6 << 20)),
		small(WithIndex(IndexSkipList), WithVerifyOnRead(true)),
	} {
		c := open(t, t.TempDir(), opts...)
		const writers, keysPer, rounds = 4, 50, 30
		var maxVersion [writers * keysPer]atomic.Uint32
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 1))
				for r := range rounds {
					for i := range keysPer {
						id := w*keysPer + i
						k := fmt.Sprintf("k%d", id)
						ver := uint32(r + 1)
						if rng.IntN(10) == 0 {
							c.Delete([]byte(k))
							continue
						}
						maxVersion[id].Store(ver)
						if err := c.Put([]byte(k), stamped(k, ver, 500+rng.IntN(9000))); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
		var readers sync.WaitGroup
		for range 3 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
				seen := map[int]uint32{}
				for {
					select {
					case <-stop:
						return
					default:
					}
					id := rng.IntN(writers * keysPer)
					k := fmt.Sprintf("k%d", id)
					r, ok := c.Get([]byte(k))
					if !ok {
						continue
					}
					b, err := io.ReadAll(r)
					if err != nil {
						t.Errorf("Get(%s): %v", k, err)
						return
					}
					ver := versionOf(b)
					if ver == 0 || ver > maxVersion[id].Load() || !bytes.Equal(b, stamped(k, ver, len(b))) {
						t.Errorf("Get(%s): %d bytes that no Put of version <= %d wrote", k, len(b), maxVersion[id].Load())
						return
					}
					if ver < seen[id] {
						t.Errorf("Get(%s): version %d after %d", k, ver, seen[id])
						return
					}
					seen[id] = ver
				}
			}()
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Drain()
				c.rebuildBloom()
			}
		}()
		wg.Wait()
		close(stop)
		readers.Wait()
		c.Drain()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentWriteTo: readers copying blobs out with WriteTo (io.Copy), verification on,
// never see another blob's bytes (the pooled buffer must not be reused while it is written).
func TestConcurrentWriteTo(t *testing.T) {
	c := open(t, t.TempDir(), small(WithVerifyOnRead(true))...)
	defer c.Close()
	const n = 64
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		c.Put([]byte(k), value(k, 0, 3000+i*10))
	}
	c.Drain()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for i := range 2000 {
				k := fmt.Sprintf("k%d", (i*7+g)%n)
				r, ok := c.Get([]byte(k))
				if !ok {
					t.Errorf("%s: miss", k)
					return
				}
				buf.Reset()
				if _, err := io.Copy(&buf, r); err != nil || !bytes.Equal(buf.Bytes(), value(k, 0, 3000+((i*7+g)%n)*10)) {
					t.Errorf("%s: %d bytes, err %v: not its value", k, buf.Len(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
