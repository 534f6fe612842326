package blobcache

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/torture"
	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// Power loss: the SIGKILL torture cannot take away what the page cache holds, so it cannot tell
// a cache that syncs from one that does not. This test can: errorfs remembers every write since
// the last sync, and after a crash PowerLoss rolls each file back to a state a power loss could
// leave (internal/vfs/errorfs/power.go): changes up to a random point kept, later ones undone,
// sectors torn, files whose directory entry was never synced gone. Then the cache is reopened and
// every key checked.
//
// With Fsync: what a Drain that returned acknowledged survives, a Delete that returned stays
// done, and nothing older or torn is served (the torture's rule, internal/torture). Without
// Fsync: a key holds, whole, a value that was put for it, or nothing (a deleted value may come
// back), or the read fails.

var (
	powerSeed   = flag.Uint64("power.seed", 0, "seed of TestPowerLoss (0: time based)")
	powerCycles = flag.Int("power.cycles", 20, "power losses of TestPowerLoss, per mode")
)

func TestPowerLoss(t *testing.T) {
	for _, mode := range []struct{ fsync, verify bool }{{true, false}, {true, true}, {false, true}} {
		t.Run(fmt.Sprintf("fsync=%v,verify=%v", mode.fsync, mode.verify), func(t *testing.T) {
			powerLoss(t, mode.fsync, mode.verify)
		})
	}
}

func powerLoss(t *testing.T, fsync, verify bool) {
	seed := *powerSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -power.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	fs := errorfs.New(vfs.Default, seed)
	dir := t.TempDir()
	const keys = 120
	optsFor := func(cycle int) []Option {
		o := small(withFS(fs), WithFsync(fsync), WithVerifyOnRead(verify), WithExpectedBlobs(256),
			withPutChunk(8<<10)) // PutFrom streams values past 8 KiB
		if cycle%4 == 3 {
			o = append(o, WithBufferedWrites(false))
		}
		if cycle%4 >= 2 {
			o = append(o, WithDirectIOReads(true))
		}
		return o
	}
	c := open(t, dir, optsFor(0)...)
	fs.TrackUnsynced(true) // the new, empty cache counts as synced
	defer func() { c.Close() }()
	base := make([]torture.State, keys)
	known := make([]bool, keys) // false after a read error: the key's state is not known
	for k := range known {
		known[k] = true
	}
	everPut := make([]map[uint64]bool, keys)
	for k := range everPut {
		everPut[k] = map[uint64]bool{}
	}
	version := uint64(1)
	var checked, hits, readErrs, files, mismatches int
	var report []string
	for cycle := range *powerCycles {
		var log []torture.Entry
		own := append([]torture.State(nil), base...)
		ownKnown := append([]bool(nil), known...)
		for range rng.IntN(400) {
			k := uint32(rng.IntN(keys))
			switch op := rng.IntN(100); {
			case op < 50:
				version++
				v := torture.Value(k, version, torture.ValueSize(k, version, 20<<10))
				log = append(log, torture.Entry{Kind: torture.PutBegin, Key: k, Version: version})
				everPut[k][version] = true
				var err error
				if op < 40 {
					err = c.Put(tortureKey(k), v)
				} else {
					err = c.PutFrom(tortureKey(k), bytes.NewReader(v), int64(len(v)))
				}
				if err != nil {
					t.Fatalf("cycle %d: Put: %v", cycle, err)
				}
				log = append(log, torture.Entry{Kind: torture.PutOK, Key: k, Version: version})
				own[k], ownKnown[k] = torture.State{Present: true, Version: version}, true
			case op < 65:
				version++
				log = append(log, torture.Entry{Kind: torture.DelBegin, Key: k, Version: version})
				if err := c.Delete(tortureKey(k)); err != nil {
					t.Fatalf("cycle %d: Delete: %v", cycle, err)
				}
				log = append(log, torture.Entry{Kind: torture.DelOK, Key: k, Version: version})
				own[k], ownKnown[k] = torture.State{}, true
			case op < 92:
				got, err := tortureRead(c, k)
				if errors.Is(err, errLie) || ownKnown[k] && (err != nil || got != own[k]) {
					t.Fatalf("cycle %d: key %d before the power loss: %v, %v; want %v", cycle, k, got, err, own[k])
				}
			default:
				version++
				log = append(log, torture.Entry{Kind: torture.DrainBegin, Version: version})
				c.Drain()
				log = append(log, torture.Entry{Kind: torture.DrainOK, Version: version})
			}
		}
		c.crash()
		n, err := fs.PowerLoss(rng)
		if err != nil {
			t.Fatal(err)
		}
		files += n
		c = open(t, dir, optsFor(cycle+1)...)
		h, err := torture.NewHistory(log, fsync)
		if err != nil {
			t.Fatal(err)
		}
		for k := range uint32(keys) {
			got, err := tortureRead(c, k)
			checked++
			readable := true
			switch {
			case errors.Is(err, errLie):
			case err != nil:
				readErrs++ // allowed: the cache says it cannot read the value
				err, readable = nil, false
			case fsync && known[k]:
				err = h.Check(k, base[k], got, false)
			case got.Present && !everPut[k][got.Version]:
				err = fmt.Errorf("key %d holds v%d, never put for it", k, got.Version)
			}
			if err != nil {
				mismatches++
				if len(report) < 20 {
					report = append(report, fmt.Sprintf("cycle %d: key %d: %v", cycle, k, err))
				}
			}
			if got.Present {
				hits++
			}
			base[k], known[k] = got, err == nil && readable
		}
	}
	t.Logf("%d power losses (%d files rolled back or dropped): %d keys checked, %d hits, %d read errors, %d mismatches",
		*powerCycles, files, checked, hits, readErrs, mismatches)
	if mismatches > 0 {
		t.Fatalf("%d mismatches:\n%s", mismatches, strings.Join(report, "\n"))
	}
}
