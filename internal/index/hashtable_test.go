package index

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

func TestShardPadding(t *testing.T) {
	if sz := unsafe.Sizeof(shard{}); sz%cacheLine != 0 {
		t.Fatalf("shard is %d bytes, not a multiple of %d", sz, cacheLine)
	}
	if slotBytes != 16 {
		t.Fatalf("slot is %d bytes, want 16", slotBytes)
	}
}

// TestBackwardShiftDelete deletes one entry from a hand-built 8-slot shard and checks every slot
// afterwards. Entries are named by letters; "A7" is entry A with home slot 7, inserted in the
// order given. Layouts list the 8 slots, "." for empty.
func TestBackwardShiftDelete(t *testing.T) {
	tests := []struct {
		name    string
		entries string
		before  string
		del     byte
		after   string
	}{
		{"head of run", "A0 B0 C0", "ABC.....", 'A', "BC......"},
		{"middle of run", "A0 B0 C0", "ABC.....", 'B', "AC......"},
		{"end of run", "A0 B0 C0", "ABC.....", 'C', "AB......"},
		{"lone entry", "A3", "...A....", 'A', "........"},
		{"entries at home stay", "A0 B1 C1", "ABC.....", 'A', ".BC....."},
		{"skip one at home, move a later one", "A0 B0 C2 D0", "ABCD....", 'B', "ADC....."},
		{"run crosses the end", "A7 B7 C7", "BC.....A", 'A', "C......B"},
		{"delete in the wrapped part", "A7 B7 C7", "BC.....A", 'B', "C......A"},
		{"home-0 entry follows across the end", "A7 B7 D0", "BD.....A", 'A', "D......B"},
		{"wrapped run where nothing may move", "A5 B6 C6 D6 E0", "DE...ABC", 'A', "DE....BC"},
		{"entry from slot 0 moves back to the end", "A6 B7 C6", "C.....AB", 'B', "......AC"},
		{"full shard, one run", "A0 B0 C0 D0 E0 F0 G0", "ABCDEFG.", 'A', "BCDEFG.."},
		{"full shard, run wraps", "A4 B4 C4 D4 E4 F4 G4", "EFG.ABCD", 'A', "FG..BCDE"},
		{"full shard, two runs meet", "A6 B6 C6 D6 E1 F1 G1", "CDEFG.AB", 'A', "DEFG..BC"},
	}
	const c = 8
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &shardTable{}
			s.resize(c, true)
			names := map[uint32]byte{}
			tagOfName := map[byte]uint32{}
			perHome := map[int]int{}
			for _, e := range strings.Fields(tt.entries) {
				home := int(e[1] - '0')
				tag := tagOf(hashAt(t, crowdShard, c, home, perHome[home]))
				perHome[home]++
				names[tag], tagOfName[e[0]] = e[0], tag
				s.put(tag, locFor(uint64(tag), uint32(e[0])))
			}
			layout := func() string {
				var b strings.Builder
				for _, tag := range s.tags {
					if tag == 0 {
						b.WriteByte('.')
					} else {
						b.WriteByte(names[tag])
					}
				}
				return b.String()
			}
			if got := layout(); got != tt.before {
				t.Fatalf("before: %s, want %s", got, tt.before)
			}
			i, ok := s.find(tagOfName[tt.del])
			if !ok {
				t.Fatalf("%c not found", tt.del)
			}
			s.removeAt(i)
			if got := layout(); got != tt.after {
				t.Fatalf("after deleting %c: %s, want %s", tt.del, got, tt.after)
			}
			if err := s.check(); err != nil {
				t.Fatal(err)
			}
			for name, tag := range tagOfName {
				i, ok := s.find(tag)
				if ok != (name != tt.del) || ok && s.locs[i] != locFor(uint64(tag), uint32(name)) {
					t.Errorf("%c: found %v at %d with %v", name, ok, i, s.locs[i])
				}
			}
		})
	}
}

// TestWrapAroundTable drives wrap-around through the public API: a run that starts at the last
// slot of a shard wraps to slot 0 and meets entries whose home is slot 0.
func TestWrapAroundTable(t *testing.T) {
	ht := NewHashTable(0)
	s := &ht.shards[crowdShard].mu
	c := len(s.tags)
	var tail, head []uint64
	for j := range 3 {
		tail = append(tail, hashAt(t, crowdShard, c, c-1, j))
		head = append(head, hashAt(t, crowdShard, c, 0, j))
	}
	for _, h := range append(append([]uint64{}, tail...), head...) {
		ht.Put(h, locFor(h, 1))
	}
	// tail[0] at the last slot, tail[1..2] at 0..1, head[0..2] at 2..4.
	want := []uint64{tail[1], tail[2], head[0], head[1], head[2]}
	for i, h := range want {
		if s.tags[i] != tagOf(h) {
			t.Fatalf("slot %d holds %#x, want %#x", i, s.tags[i], tagOf(h))
		}
	}
	if s.tags[c-1] != tagOf(tail[0]) {
		t.Fatalf("last slot holds %#x, want %#x", s.tags[c-1], tagOf(tail[0]))
	}
	for _, h := range []uint64{tail[0], head[0], tail[2]} {
		if _, ok := ht.Delete(h); !ok {
			t.Fatalf("Delete(%#x) missed", h)
		}
		checkIndex(t, ht)
	}
	for _, h := range []uint64{tail[1], head[1], head[2]} {
		if loc, ok := ht.Get(h); !ok || loc != locFor(h, 1) {
			t.Fatalf("Get(%#x) = %v %v", h, loc, ok)
		}
	}
	if ht.Len() != 3 {
		t.Fatalf("Len %d, want 3", ht.Len())
	}
}

// TestGrowth fills one shard and checks its capacity steps by 1.25x and its load stays in
// [0.7, 0.875] once it has grown past the minimum.
func TestGrowth(t *testing.T) {
	ht := NewHashTable(0)
	s := &ht.shards[3].mu
	r := rand.New(rand.NewPCG(1, 2))
	var caps []int
	for n := 1; n <= 20000; n++ {
		before := len(s.tags)
		ht.Put(3<<(64-shardBits)|r.Uint64()>>shardBits|1, Loc{Offset: uint32(n)})
		if c := len(s.tags); c != before {
			caps = append(caps, c)
			// 1.25x, give or take the allocator's rounding of the buffer: up to the next
			// size class (up to 19%) while small, to the nearest 8 KiB page above.
			want, halfPage := before*growNum/growDen, allocPage/2/slotBytes
			if want*slotBytes <= maxSmallAlloc && (c < want || c > want+want/5+1) ||
				want*slotBytes > maxSmallAlloc && (c < want-halfPage || c > want+halfPage) {
				t.Fatalf("grew %d -> %d, want about %d", before, c, want)
			}
			load := float64(s.count) / float64(c)
			if c*slotBytes <= maxSmallAlloc && c > 200 && load < 0.58 ||
				c*slotBytes > maxSmallAlloc && (load < 0.65 || load > 0.75) {
				t.Fatalf("load %.3f after growing to %d", load, c)
			}
		}
		if s.count*maxLoadDen > len(s.tags)*maxLoadNum {
			t.Fatalf("load %d/%d over 7/8", s.count, len(s.tags))
		}
	}
	if len(caps) < 20 {
		t.Fatalf("only %d growth steps: %v", len(caps), caps)
	}
	t.Logf("capacities: %v", caps)
	checkIndex(t, ht)
}

func TestCapacityHint(t *testing.T) {
	for _, n := range []int{1000, 100_000, 1_000_000} {
		ht := NewHashTable(n)
		before := ht.MemoryBytes()
		r := rand.New(rand.NewPCG(uint64(n), 0))
		for range n {
			ht.Put(r.Uint64()|1, Loc{})
		}
		if after := ht.MemoryBytes(); after != before {
			t.Errorf("hint %d: grew from %d to %d bytes", n, before, after)
		}
		perEntry := float64(ht.MemoryBytes()) / float64(n)
		t.Logf("hint %d: %.1f bytes/entry when full", n, perEntry)
	}
}

// TestProbeLengths measures the slots read per hit and per miss in a shard at 0.7 and at 0.875
// load, the two ends of the band growth keeps it in, and checks them against linear probing's
// expected (1+1/(1-a))/2 and (1+1/(1-a)^2)/2 with slack.
func TestProbeLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, load := range []float64{0.7, 0.875} {
		s := &shardTable{}
		s.resize(80000, true)
		c := len(s.tags)
		n := int(load * float64(c))
		for s.count < n {
			s.put(r.Uint32()|1, Loc{})
		}
		hitSlots := 0
		for i, tag := range s.tags {
			if tag != 0 {
				hitSlots += (i-s.home(tag)+c)%c + 1
			}
		}
		missSlots, misses := 0, 100000
		for range misses {
			tag := r.Uint32() | 1
			for i := s.home(tag); ; i = (i + 1) % c {
				missSlots++
				if s.tags[i] == 0 {
					break
				}
			}
		}
		hit := float64(hitSlots) / float64(n)
		miss := float64(missSlots) / float64(misses)
		wantHit := (1 + 1/(1-load)) / 2
		wantMiss := (1 + 1/((1-load)*(1-load))) / 2
		t.Logf("load %.3f: %.2f slots per hit (theory %.2f), %.2f per miss (theory %.2f)", load, hit, wantHit, miss, wantMiss)
		if hit > 1.3*wantHit || miss > 1.5*wantMiss {
			t.Errorf("load %.3f: probes too long", load)
		}
	}
}
