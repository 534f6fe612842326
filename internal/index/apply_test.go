package index

import (
	"math/rand/v2"
	"testing"
)

// TestApplyMatchesSequential: Apply gives the same index as the same ops done one by one, for
// both implementations, with repeated hashes (order matters) and deletes.
func TestApplyMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ops := make([]Op, 50000)
	for i := range ops {
		h := rng.Uint64N(5000)*0x9e3779b97f4a7c15 | 1
		ops[i] = Op{Hash: h, Loc: Loc{Segment: uint32(i), Offset: uint32(i * 3), Length: 7}, Delete: rng.IntN(5) == 0}
	}
	for name, pair := range map[string][2]Index{
		"hashtable": {NewHashTable(0), NewHashTable(0)},
		"skiplist":  {NewSkipList(), NewSkipList()},
	} {
		bulk, seq := pair[0], pair[1]
		bulk.Apply(ops)
		for _, op := range ops {
			if op.Delete {
				seq.Delete(op.Hash)
			} else {
				seq.Put(op.Hash, op.Loc)
			}
		}
		if bulk.Len() != seq.Len() {
			t.Fatalf("%s: Apply left %d entries, one by one %d", name, bulk.Len(), seq.Len())
		}
		seq.Range(func(h uint64, loc Loc) bool {
			if got, ok := bulk.Get(h); !ok || got != loc {
				t.Fatalf("%s: hash %#x: Apply has %v %v, one by one %v", name, h, got, ok, loc)
			}
			return true
		})
	}
}
