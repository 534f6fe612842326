package index

// Loc is where a record lives: the segment id, the byte offset of the record in the segment, and
// the record's whole length (header + key + value). It is 12 bytes with no padding, so a table of
// Locs is pointer-free and dense.
type Loc struct {
	Segment uint32
	Offset  uint32
	Length  uint32
}

// Index maps a key hash to the location of the newest record for that key. Hash 0 is reserved
// (it marks an empty slot); passing it is a programmer error and panics. All methods are safe for
// concurrent use.
//
// An index tells hashes apart by their top IdentityBits bits alone (Canonical): two hashes that
// agree on them are one entry, the newest Put wins, and Range hands back the canonical hash.
// This is what lets a HashTable slot be 16 bytes; the cache reads the key of every record it
// finds and compares it, so two keys that share an entry cost a miss, never a wrong blob.
type Index interface {
	// Get returns the location stored for h.
	Get(h uint64) (Loc, bool)
	// Lookup is Get with the entry's hit count, read with its location: a reader that finds it
	// at MaxHits need not Touch it.
	Lookup(h uint64) (loc Loc, hits int, ok bool)
	// Put inserts or replaces; it returns the previous location if there was one.
	Put(h uint64, loc Loc) (old Loc, replaced bool)
	// Delete removes h and returns the location it had.
	Delete(h uint64) (old Loc, ok bool)
	// DeleteIf removes h only if its current location is in segment seg, and then returns that
	// location and true; otherwise it changes nothing and returns false. Evicting a segment uses
	// it so that a newer record of the same key in a newer segment survives.
	DeleteIf(h uint64, seg uint32) (old Loc, ok bool)
	// Touch counts a hit on h's entry if its location is loc: the record there was hit. The
	// count saturates at MaxHits. It is lock-free or takes a read lock only, and allocates
	// nothing. Every Put of h (a new location, or the same one again) clears the count.
	Touch(h uint64, loc Loc)
	// Hits returns h's hit count if its location is loc, else 0 (eviction asks it of each
	// record of the oldest segment, to decide whether to write it again).
	Hits(h uint64, loc Loc) int
	// SetHits sets h's hit count to min(n, MaxHits) if its location is loc: a record written
	// again keeps part of its count.
	SetHits(h uint64, loc Loc, n int)
	// Len returns the number of entries.
	Len() int
	// Range calls fn for every entry until fn returns false. It never holds one lock for the
	// whole walk; entries added or removed during Range may or may not be seen, entries present
	// throughout are seen exactly once. fn must not call back into the index.
	Range(fn func(h uint64, loc Loc) bool)
	// MemoryBytes is the memory the index holds: table capacity, not just live entries.
	MemoryBytes() int64
	// Apply performs ops as Put and Delete would, in order for any one hash. It is the bulk path
	// of recovery: it may use several goroutines and takes each lock once, not once per op.
	Apply(ops []Op)
}

// IdentityBits is how many of a hash's top bits an index keeps: the 8 bits that pick a
// HashTable shard and the 32 of the tag a slot stores. Among n keys about n*n/2^41 pairs agree on
// them (45 pairs in 10M keys), and each such pair keeps one of its keys at a time.
const IdentityBits = 40

// Canonical returns the hash an index keeps for h: its top IdentityBits bits, the rest zero; if
// the 32 bits below the shard bits are all zero, the lowest of them is set, so that no canonical
// hash has an all-zero tag (the HashTable's empty slot).
func Canonical(h uint64) uint64 {
	c := h &^ (1<<(64-IdentityBits) - 1)
	if c<<shardBits == 0 {
		c |= 1 << (64 - IdentityBits)
	}
	return c
}

// FilterHash is the hash a bloom filter in front of an index takes for h: Canonical(h) with its
// kept bits spread over all 64 again (one multiply of them by an odd constant, XORed in), so
// that a filter reading its word from the top bits and its probes from the low bits sees
// uniform, independent bits in both. A filter built from the hashes Range hands back then holds
// every key the index holds, as one built from the keys' own hashes would.
func FilterHash(h uint64) uint64 {
	c := Canonical(h)
	return c ^ (c>>(64-IdentityBits))*0x9e3779b97f4a7c15
}

// MaxHits is the largest hit count an entry keeps (two bits).
const MaxHits = 3

// Op is one change for Apply: a put of Loc, or a delete when Delete is set.
type Op struct {
	Hash   uint64
	Loc    Loc
	Delete bool
}

var (
	_ Index = (*HashTable)(nil)
	_ Index = (*SkipList)(nil)
)

// checkHash panics on the reserved hash 0. The caller (the key hasher) maps 0 to 1, so reaching
// here with 0 is a bug; silently accepting it would make an empty slot look like a hit.
func checkHash(h uint64) {
	if h == 0 {
		panic("index: hash 0 is reserved (map it to 1 before calling)")
	}
}

// canonical is Canonical for a hash passed to an index: it panics on the reserved 0.
func canonical(h uint64) uint64 {
	checkHash(h)
	return Canonical(h)
}
