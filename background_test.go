package blobcache

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// TestBloomRebuildOnDrift: a cache that outgrows ExpectedBlobs drives the filter's estimated
// false-positive rate past BloomMaxFPR; the rebuild sizes the filter to the index and keeps
// every key.
func TestBloomRebuildOnDrift(t *testing.T) {
	c := open(t, t.TempDir(), small(WithExpectedBlobs(1000))...)
	closer, err := c.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
	for i := range 20000 {
		c.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
	}
	before := c.Stats()
	if before.BloomFPR <= DefaultBloomMaxFPR {
		t.Fatalf("estimated FPR %.4f after 20x the expected blobs", before.BloomFPR)
	}
	if !c.maybeRebuildBloom() {
		t.Fatal("no rebuild past the bound")
	}
	after := c.Stats()
	if after.BloomFPR > DefaultBloomMaxFPR || after.BloomBytes <= before.BloomBytes {
		t.Fatalf("after rebuild: FPR %.4f, %d bytes (was %d)", after.BloomFPR, after.BloomBytes, before.BloomBytes)
	}
	for i := range 20000 {
		expect(t, c, fmt.Sprintf("k%d", i), []byte("v"))
	}
	if c.maybeRebuildBloom() {
		t.Fatal("rebuilt a filter within bounds")
	}
	if err := closer(); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("k"), nil); err == nil {
		t.Fatal("Put after closer")
	}
}

// TestSweepBesideStateWrite: the background sweep runs beside writes of the state file (a
// lease, an InvalidateAll), so it must leave their temporary file alone: an InvalidateAll held
// between writing STATE.tmp and renaming it while the sweep runs still succeeds.
func TestSweepBesideStateWrite(t *testing.T) {
	fs := faultyFS(t)
	c := open(t, t.TempDir(), small(withFS(fs))...)
	defer c.Close()
	hold := make(chan struct{})
	held := fs.Add(&errorfs.Fault{Ops: errorfs.OpSync, Name: stateFile + ".tmp", Action: errorfs.Ignore, Hold: hold, Times: 1})
	done := make(chan error, 1)
	go func() { done <- c.InvalidateAll(time.Time{}) }()
	for deadline := time.Now().Add(10 * time.Second); held.Injected() == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("InvalidateAll never synced STATE.tmp")
		}
	}
	c.sweepOrphans()
	close(hold)
	if err := <-done; err != nil {
		t.Fatalf("InvalidateAll beside the sweep: %v", err)
	}
}
