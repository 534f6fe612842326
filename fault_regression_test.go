package blobcache

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// Regression tests for ways the cache once lied (returned an older or a deleted value, or lost
// what Drain acknowledged) under faults, crashes and damage. docs/RELIABILITY.md lists each
// finding and its fix.

// TestInFlightBatchAtCrashKeepsDrainedData: flush workers write batches in parallel, so a process
// killed while two are in flight can leave the later one written and the earlier one not: a gap
// of zeros, followed by records, possibly in the same 512-byte sector. That is a torn tail, not
// damage. Taken for damage, recovery forgets the keys of the records after the gap, and a key
// whose drained value is intact reads as a miss. (The torture met this: "found N corrupt
// records", offset ... "record magic 0x0000".)
func TestInFlightBatchAtCrashKeepsDrainedData(t *testing.T) {
	fs := faultyFS(t)
	dir := t.TempDir()
	opts := small(withFS(fs))
	c := open(t, dir, opts...)
	v1, v2 := value("a", 1, 300), value("a", 2, 300)
	if err := c.Put([]byte("a"), v1); err != nil {
		t.Fatal(err)
	}
	c.Drain() // v1 is durable
	cut := func() uint64 {
		c.w.mu.Lock()
		defer c.w.mu.Unlock()
		if err := c.w.cut(); err != nil {
			t.Fatal(err)
		}
		return c.w.nextSeq
	}
	// The next batch (one small record) never reaches the file, as if the process died while
	// its flush worker was still writing it; the batch after it does.
	fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Action: errorfs.Ignore, Times: 1})
	if err := c.Put([]byte("tiny"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	c.w.waitCommitted(cut())
	if err := c.Put([]byte("a"), v2); err != nil {
		t.Fatal(err)
	}
	c.w.waitCommitted(cut())
	if fault.Injected() != 1 {
		t.Fatal("no batch held back")
	}
	c.crash()
	c = open(t, dir, opts...)
	defer c.Close()
	if got := lookup(t, c, "a", v1, v2); got != hit {
		t.Fatalf("a: %v, want v1 (drained) or v2; %s", got, c.Stats().LastCorruption)
	}
	if st := c.Stats(); st.CorruptRecord != 0 {
		t.Fatalf("a crash counted as corruption: %s", st.LastCorruption)
	}
}

// TestSegmentCreatedAtCrashIsTorn: a process killed between creating a segment file and writing
// its header leaves an empty file (or a header block of zeros). That is what a crash leaves, a
// torn tail, not damage: Stats.CorruptRecord must stay 0 (the torture met it four times in 500
// kills).
func TestSegmentCreatedAtCrashIsTorn(t *testing.T) {
	for _, size := range []int{0, 100, segment.HeaderSize} {
		dir := t.TempDir()
		c := open(t, dir, small()...)
		vals := putKeys(t, c, "k", 20, 0, 500)
		c.Close()
		if err := os.WriteFile(filepath.Join(dir, segDir, segment.FileName(2)), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		c = open(t, dir, small()...)
		expectAll(t, c, vals)
		st := c.Stats()
		c.Close()
		if st.CorruptRecord != 0 || st.TornTails == 0 {
			t.Fatalf("a %d-byte segment file of zeros: %d corrupt, %d torn (%s)", size, st.CorruptRecord, st.TornTails, st.LastCorruption)
		}
	}
}

// TestPowerLossWithoutFsyncOrVerify is TestPowerLoss without Fsync and without VerifyOnRead. An
// overwritten record is punched out as soon as its newer record is committed, before that one is
// on disk; a power loss can then lose the newer record and keep the punch, and the key reads as
// its older value with its blocks zeroed: a torn value, served (with VerifyOnRead it is an error,
// which TestPowerLoss accepts).
func TestPowerLossWithoutFsyncOrVerify(t *testing.T) { powerLoss(t, false, false) }

// TestForgottenKeyNotServedPunched: when a batch fails, its keys are forgotten in memory and
// their older records freed (and punched out) at once, while the tombstones that make the
// forgetting durable are written later. A crash in between (here: every write fails until the
// crash) brings the older record back through its footer, with its blocks punched out, and it is
// served with zeros. Coming back whole is allowed (v2 was never drained: v1 is the last durable
// value); coming back torn is not.
func TestForgottenKeyNotServedPunched(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			fs := faultyFS(t)
			dir := t.TempDir()
			opts := small(withFS(fs), WithFsync(fsync))
			c := open(t, dir, opts...)
			v1, v2 := value("k", 1, 20000), value("k", 2, 20000)
			if err := c.Put([]byte("k"), v1); err != nil {
				t.Fatal(err)
			}
			c.Close() // segment 1, sealed, holds v1
			c = open(t, dir, opts...)
			fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg"})
			if err := c.Put([]byte("k"), v2); err != nil {
				t.Fatal(err)
			}
			c.Drain() // v2's batch fails, and so does every tombstone batch after it
			c.crash()
			fs.Clear()
			c = open(t, dir, opts...)
			defer c.Close()
			lookup(t, c, "k", v1, v2)
		})
	}
}
