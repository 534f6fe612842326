package blobcache

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// Fault tests that fail on the code as it is: each is a way to make the cache lie (return an
// older value or a deleted one) or lose what Drain acknowledged. docs/RELIABILITY.md lists them
// with the fix proposed for each; a test moves to fault_test.go once its fix is in.

// TestFailedBatchNeverServesOlderValue: when the batch holding a key's new value fails to write,
// a Get must not fall back to the value the key had before (that Put returned nil and was
// superseded): not while the process lives, and not after a reopen either.
func TestFailedBatchNeverServesOlderValue(t *testing.T) {
	fs := faultyFS()
	dir := t.TempDir()
	c := open(t, dir, small(withFS(fs))...)
	v1, v2 := value("k", 1, 3000), value("k", 2, 3000)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Times: 1})
	if err := c.Put([]byte("k"), v2); err != nil {
		t.Fatal(err)
	}
	c.Drain() // the batch holding v2 fails
	lookup(t, c, "k", v2)
	c.Close() // reports the failure; v2 is not on disk, v1 is
	c = open(t, dir, small(withFS(fs))...)
	defer c.Close()
	lookup(t, c, "k", v2)
}

// TestFailedSegmentCreateKeepsDelete: when the segment a batch needs cannot be created (disk
// full), the batch is dropped; a Delete in it that returned must still hold (and the Puts in it
// must not fall back to older values).
func TestFailedSegmentCreateKeepsDelete(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			fs := faultyFS()
			dir := t.TempDir()
			opts := small(withFS(fs), WithFsync(fsync))
			c := open(t, dir, opts...)
			if err := c.Put([]byte("gone"), value("gone", 0, 100)); err != nil {
				t.Fatal(err)
			}
			if err := c.Put([]byte("k"), value("k", 0, 100)); err != nil {
				t.Fatal(err)
			}
			c.Close()
			// After open no segment is active: the first batch needs a new one.
			c = open(t, dir, opts...)
			defer c.Close()
			fs.Add(&errorfs.Fault{Ops: errorfs.OpCreate, Name: "*.seg", Err: syscall.ENOSPC})
			if err := c.Put([]byte("k"), value("k", 1, 100)); err != nil {
				t.Fatal(err)
			}
			err := c.Delete([]byte("gone"))
			c.Drain()
			if err == nil {
				if got := lookup(t, c, "gone"); got == hit {
					t.Fatal("a Delete that returned nil was undone: the deleted value is back")
				}
			}
			lookup(t, c, "k", value("k", 1, 100))
		})
	}
}

// TestDrainedDataSurvivesFailedBatchAndCrash: a batch that fails to write leaves a gap in its
// segment. With Fsync, what a later Drain acknowledged must survive a crash, and a Delete that
// returned must stay done; the recovery scan must not stop at the gap.
func TestDrainedDataSurvivesFailedBatchAndCrash(t *testing.T) {
	for _, action := range []errorfs.Action{errorfs.Fail, errorfs.Short} {
		t.Run(fmt.Sprint("action=", action), func(t *testing.T) {
			fs := faultyFS()
			dir := t.TempDir()
			opts := small(withFS(fs), WithFsync(true))
			c := open(t, dir, opts...)
			a := value("a", 0, 3000)
			if err := c.Put([]byte("a"), a); err != nil {
				t.Fatal(err)
			}
			c.Drain()
			fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Action: action, Keep: -1, Times: 1})
			lost := putKeys(t, c, "lost", 5, 0, 1000) // their batch fails
			c.Drain()
			// The failure is reported once, by the next Put (or Flush).
			_ = c.Put([]byte("c"), []byte("retry"))
			cv := value("c", 0, 2000)
			if err := c.Put([]byte("c"), cv); err != nil {
				t.Fatalf("Put after the reported failure: %v", err)
			}
			if err := c.Delete([]byte("a")); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			c.Drain()
			c.crash()
			c = open(t, dir, opts...)
			defer c.Close()
			if got := lookup(t, c, "c", cv); got != hit {
				t.Fatalf("c, drained with Fsync after the failed batch: %v", got)
			}
			if got := lookup(t, c, "a"); got == hit {
				t.Fatal("a, deleted with Fsync after the failed batch, is back")
			}
			for k, v := range lost {
				lookup(t, c, k, v)
			}
		})
	}
}

// TestDamagedSegmentHeaderKeepsTombstones: a segment whose header block is damaged is dropped
// on open; the deletes it held must not be undone (a blob deleted there and stored in an older
// segment must not come back).
func TestDamagedSegmentHeaderKeepsTombstones(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	if err := c.Put([]byte("gone"), value("gone", 0, 500)); err != nil {
		t.Fatal(err)
	}
	c.Close() // segment 1 holds gone
	c = open(t, dir, small()...)
	if err := c.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	c.Close() // segment 2 holds its tombstone
	seg := filepath.Join(dir, segDir, segment.FileName(2))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0x01 // reserved field of the segment header
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	if got := lookup(t, c, "gone"); got == hit {
		t.Fatal("the deleted blob is back")
	}
}

// TestDamageInUnsealedSegmentNeverServesOlderValue: in a segment recovered by scanning (no
// footer: a crash), a damaged record hides the records after it. A newer value or a delete of a
// key among them must not give way to the key's older value.
func TestDamageInUnsealedSegmentNeverServesOlderValue(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	v1, v2 := value("k", 1, 300), value("k", 2, 300)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("gone"), value("gone", 0, 300)); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if err := c.Put([]byte("other"), value("other", 0, 300)); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("k"), v2); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	c.crash()
	// Damage the header of "other", between the old and the new records of k and gone.
	seg := filepath.Join(dir, segDir, segment.FileName(1))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(segment.HeaderSize)
	for {
		h, k, err := record.Decode(b[off:])
		if err != nil {
			t.Fatal("record of other not found")
		}
		if string(k) == "other" {
			break
		}
		off += h.Len()
	}
	b[off+8] ^= 0x04 // valueLen
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	lookup(t, c, "k", v2)
	if got := lookup(t, c, "gone"); got == hit {
		t.Fatal("the deleted blob is back")
	}
}

// TestFailedSealKeepsData: a segment whose footer cannot be written is recovered by scanning on
// the next open. Records in it that were overwritten (and punched out) must not stop the scan
// before the newer records, or the key would read as its value in an older segment.
func TestFailedSealKeepsData(t *testing.T) {
	fs := faultyFS()
	dir := t.TempDir()
	opts := small(withFS(fs))
	c := open(t, dir, opts...)
	v0, v1, v2 := value("k", 0, 20000), value("k", 1, 20000), value("k", 2, 20000)
	if err := c.Put([]byte("k"), v0); err != nil {
		t.Fatal(err)
	}
	c.Close() // segment 1: v0
	c = open(t, dir, opts...)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if err := c.Put([]byte("k"), v2); err != nil { // frees v1: punched once segment 2 is sealed
		t.Fatal(err)
	}
	c.Drain()
	// Segment 2's seal fails: its file keeps no footer.
	fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpTruncate, Name: segment.FileName(2), Times: 1})
	filler := putKeys(t, c, "fill", 120, 0, 20000) // rotates to segment 3 and 4
	c.Close()
	if fault.Injected() != 1 {
		t.Fatalf("seal fault injected %d times", fault.Injected())
	}
	c = open(t, dir, opts...)
	defer c.Close()
	if got := lookup(t, c, "k", v2); got != hit {
		t.Fatalf("k: %v", got)
	}
	for k, v := range filler {
		lookup(t, c, k, v)
	}
}

// TestFullDiskEvictsToMakeRoom: when the disk fills before MaxSize is reached (the disk is
// shared, or MaxSize was set too high), the cache must evict to make room, so Puts fail only for
// a while rather than until something outside frees space.
func TestFullDiskEvictsToMakeRoom(t *testing.T) {
	fs := faultyFS()
	fs.SetCapacity(8 << 20)
	c := open(t, t.TempDir(), small(withFS(fs), WithMaxSize(64<<20))...)
	defer c.Close()
	failures, lastErr := 0, error(nil)
	for i := range 3000 { // 24 MiB
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 8000)); err != nil {
			failures++
			lastErr = err
		}
	}
	c.Drain()
	k := "k2999"
	if got := lookup(t, c, k, value(k, 0, 8000)); got != hit || failures > 10 {
		t.Fatalf("%d of 3000 Puts failed (last: %v), the last blob is a %v; evictions %d",
			failures, lastErr, got, c.Stats().Evictions)
	}
}

// TestTorturePerBlob is TestTorture on a cache of one file per blob. It finds that a crash while
// a key's new blob file is being written loses the key's previous, durable value (see
// TestPerBlobTornNewerFileKeepsOlder).
func TestTorturePerBlob(t *testing.T) { runTorture(t, true) }

// TestPerBlobTornNewerFileKeepsOlder: a crash while the file of a key's new value is being
// written leaves that file empty or short. On open the newest file of a key wins and the older
// ones are removed, unchecked: the durable older value is deleted for a file that cannot be read.
// The older value (or the new one, whole) must survive.
func TestPerBlobTornNewerFileKeepsOlder(t *testing.T) {
	dir := t.TempDir()
	opts := small(WithPerBlobFiles(), WithFsync(true))
	c := open(t, dir, opts...)
	v1 := value("k", 1, 5000)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	c.Close()
	h := record.KeyHash([]byte("k"))
	sub := filepath.Dir(c.blobPath(h, 1))
	ents, err := os.ReadDir(sub)
	if err != nil || len(ents) != 1 {
		t.Fatalf("blob files: %v, %v", ents, err)
	}
	_, seq, ok := parseBlobName(ents[0].Name())
	if !ok {
		t.Fatal(ents[0].Name())
	}
	// The next value's file, as a crash right after creating it leaves it.
	for _, size := range []int{0, 40} {
		if err := os.WriteFile(c.blobPath(h, seq+1), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		c = open(t, dir, opts...)
		r, ok := c.Get([]byte("k"))
		if !ok {
			c.Close()
			t.Fatalf("a torn %d-byte newer file made the durable value a miss", size)
		}
		got, err := io.ReadAll(r)
		c.Close()
		if err != nil || string(got) != string(v1) {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
	}
}

// TestModelUnderWriteFaults is TestModelUnderReadFaults with writes, syncs and segment creations
// failing at random too. It finds the bugs above: a Get that returns a key's older value after
// the batch with its newer one failed, a Delete undone by a dropped batch.
func TestModelUnderWriteFaults(t *testing.T) {
	faultModel(t, []*errorfs.Fault{
		{Ops: errorfs.OpWrite, Name: "*.seg", Prob: 0.02},
		{Ops: errorfs.OpWrite, Name: "*.seg", Prob: 0.01, Action: errorfs.Short, Keep: -1},
		{Ops: errorfs.OpSync, Name: "*.seg", Prob: 0.02},
		{Ops: errorfs.OpCreate, Name: "*.seg", Prob: 0.1, Err: syscall.ENOSPC},
		{Ops: errorfs.OpRead, Name: "*.seg", Prob: 0.02},
	})
}
