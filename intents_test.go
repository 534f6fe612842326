package blobcache

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// TestIntentLogFull: with the intent log's ring full of pending intents, writes wait for
// commits and go on, none hangs (each writer under a watchdog), and every value, from a byte
// to above WriteBufferSize (streamed), reads back. The ring is made small (256 slots) against
// write buffers that hold thousands of records.
func TestIntentLogFull(t *testing.T) {
	c := open(t, t.TempDir(), WithBufferedWrites(true), WithWriteBufferSize(1<<20), WithSegmentSize(32<<20),
		WithExpectedBlobs(1<<16), withPutChunk(4096), func(o *Options) { o.intentSlots = 256 })
	defer c.Close()
	sizes := []int{1, 10, 100, 1 << 20, 1<<20 + 1} // up to, at and past WriteBufferSize (streamed)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wd := startWatchdog(t, fmt.Sprint("writer ", g), 0)
			defer wd.stop()
			for i := range 20000 {
				wd.tick()
				k := fmt.Sprintf("g%d-%d", g, i%5000)
				size := sizes[0]
				if i%500 == 0 {
					size = sizes[i/500%len(sizes)]
				}
				var err error
				if size > 1<<20 {
					err = c.PutFrom([]byte(k), bytes.NewReader(value(k, i, size)), int64(size))
				} else {
					err = c.Put([]byte(k), value(k, i, size))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	c.w.mu.Lock()
	waits := c.w.intentWaits
	c.w.mu.Unlock()
	if waits == 0 {
		t.Fatal("no write waited for the intent log: the test did not fill it")
	}
	c.Drain()
	for g := range 4 {
		for j := range 5000 {
			k := fmt.Sprintf("g%d-%d", g, j)
			i := 15000 + j // the last write of k
			size := sizes[0]
			if i%500 == 0 {
				size = sizes[i/500%len(sizes)]
			}
			if got, ok := getBytes(t, c, k); !ok || !bytes.Equal(got, value(k, i, size)) {
				t.Fatalf("%s: hit %v, %d bytes, not its last value", k, ok, len(got))
			}
		}
	}
	t.Logf("%d writes waited for the intent log", waits)
}
