package index

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: INDEX_SEED, else the clock)")

// testSeed returns the seed of a randomized test and logs it, so a failure can be replayed with
// go test -run <name> -seed=<seed> (or INDEX_SEED=<seed>).
func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		if v := os.Getenv("INDEX_SEED"); v != "" {
			var err error
			if s, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("INDEX_SEED: %v", err)
			}
		}
	}
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run '%s' -seed=%d ./internal/index/)", s, t.Name(), s)
	return s
}

// impls are the Index implementations every behavioural test runs against.
var impls = []struct {
	name string
	new  func() Index
}{
	{"HashTable", func() Index { return NewHashTable(0) }},
	{"HashTableHint", func() Index { return NewHashTable(4096) }},
	{"SkipList", func() Index { return NewSkipList() }},
}

// crowdShard is the shard the collision-heavy generators pile into.
const crowdShard = 0x5a

// hashGen draws hashes that exercise the edges of HashTable: uniform ones, ones crowded into one
// shard with homes near slot 0 or near the last slot (so runs wrap around the table end), and
// ones in the first and last shards.
type hashGen struct{ r *rand.Rand }

func (g hashGen) next() uint64 {
	// Canonical hashes: the models the tests keep are maps of hashes, and an index keeps only
	// the canonical part (TestCanonical tests that).
	var sh int
	var tag uint32
	switch p := g.r.IntN(64); {
	case p < 24:
		sh, tag = g.r.IntN(numShards), g.r.Uint32()
	case p < 48: // crowded shard, anywhere: makes it grow through many sizes
		sh, tag = crowdShard, g.r.Uint32()
	case p < 50: // crowded shard, home slot 0 at any capacity: one long run
		sh, tag = crowdShard, g.r.Uint32N(1<<12)
	case p < 52: // crowded shard, home at the last slot: the run wraps to slot 0
		sh, tag = crowdShard, ^g.r.Uint32N(1<<12)
	case p < 53: // smallest tags, first shard, home slot 0
		sh, tag = 0, g.r.Uint32N(1<<8)
	case p < 54: // largest tags, last shard, home at the last slot
		sh, tag = numShards-1, ^g.r.Uint32N(1<<8)
	case p < 59: // first shard
		sh, tag = 0, g.r.Uint32()
	default: // last shard
		sh, tag = numShards-1, g.r.Uint32()
	}
	return Canonical(uint64(sh)<<(64-shardBits) | uint64(tag)<<tagShift)
}

// locFor derives a Loc from a hash and a segment, so that any Loc read back can be checked whole:
// a torn read (fields of two different Puts) fails validLoc.
func locFor(h uint64, seg uint32) Loc {
	return Loc{Segment: seg, Offset: uint32(h>>32) ^ seg*0x9e3779b9, Length: uint32(h) + seg}
}

func validLoc(h uint64, loc Loc) bool { return loc == locFor(h, loc.Segment) }

// checkIndex checks the structural invariants of an implementation.
func checkIndex(t testing.TB, idx Index) {
	t.Helper()
	var err error
	switch x := idx.(type) {
	case *HashTable:
		err = x.check()
	case *SkipList:
		err = x.check()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// check verifies every shard: sizes, load bound, count, shard of every hash, and that every entry
// is reachable from its home slot without crossing an empty slot.
func (t *HashTable) check() error {
	for si := range t.shards {
		s := &t.shards[si].mu
		s.RLock()
		err := s.check()
		s.RUnlock()
		if err != nil {
			return fmt.Errorf("shard %d: %w", si, err)
		}
	}
	return nil
}

func (s *shardTable) check() error {
	c := len(s.tags)
	if c < minShardCap || len(s.locs) != c {
		return fmt.Errorf("capacity %d, %d locs", c, len(s.locs))
	}
	if s.count*maxLoadDen > c*maxLoadNum {
		return fmt.Errorf("count %d over 7/8 of capacity %d", s.count, c)
	}
	n := 0
	for i, tag := range s.tags {
		if tag == 0 {
			if s.locs[i] != (Loc{}) {
				return fmt.Errorf("empty slot %d has loc %v", i, s.locs[i])
			}
			continue
		}
		n++
		for j := s.home(tag); j != i; j = (j + 1) % c {
			if s.tags[j] == 0 {
				return fmt.Errorf("slot %d: tag %#x (home %d) cut off by empty slot %d", i, tag, s.home(tag), j)
			}
		}
	}
	if n != s.count {
		return fmt.Errorf("count %d, %d slots used", s.count, n)
	}
	return nil
}

// check verifies the skip list: every level strictly increasing and made of nodes tall enough,
// each level a sub-list of the one below, no links above the height, count and bytes right.
func (l *SkipList) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	top := int(l.height.Load())
	for lv := top; lv < maxHeight; lv++ {
		if l.head.next(lv).Load() != nil {
			return fmt.Errorf("level %d linked above height %d", lv, top)
		}
	}
	below := map[*node]bool{}
	for lv := 0; lv < top; lv++ {
		seen := map[*node]bool{}
		var prev uint64
		n, bytes := 0, int64(0)
		for x := l.head.next(lv).Load(); x != nil; x = x.next(lv).Load() {
			if x.hash <= prev {
				return fmt.Errorf("level %d: hash %#x after %#x", lv, x.hash, prev)
			}
			if x.height() <= lv || (x.high != nil) != (x.height() > lowLevels) {
				return fmt.Errorf("level %d: node of height %d, high %v", lv, x.height(), x.high != nil)
			}
			if lv > 0 && !below[x] {
				return fmt.Errorf("level %d: node %#x missing from level %d", lv, x.hash, lv-1)
			}
			seen[x] = true
			prev = x.hash
			n++
			bytes += nodeBytes(x.height())
		}
		if lv == 0 {
			if n != l.Len() {
				return fmt.Errorf("count %d, %d nodes", l.Len(), n)
			}
			if bytes != l.bytes.Load() {
				return fmt.Errorf("bytes %d, nodes hold %d", l.bytes.Load(), bytes)
			}
		}
		below = seen
	}
	return nil
}

// hashAt returns the canonical hash of the j-th smallest tag of shard sh whose home slot is home
// in a shard of capacity c (j small).
func hashAt(t testing.TB, sh uint8, c, home, j int) uint64 {
	t.Helper()
	// tag*c>>32 == home: the least such tag is ceil(home*2^32/c).
	tag := max(uint32((uint64(home)<<32+uint64(c)-1)/uint64(c)), 1) + uint32(j)
	h := hashOf(int(sh), tag)
	s := shardTable{tags: make([]uint32, c)}
	if got := s.home(tagOf(h)); got != home || tag == 0 || Canonical(h) != h {
		t.Fatalf("hashAt(%d, %d, %d, %d) = %#x with home %d", sh, c, home, j, h, got)
	}
	return h
}
