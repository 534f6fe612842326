package batch

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// chunkSize is the arena allocation unit outside direct mode: the arena grows a chunk at a
// time, so a batch holds memory in proportion to what was put in it.
const chunkSize = 1 << 20

// Entry is one record of a batch.
type Entry struct {
	segment.Entry        // Offset is relative to the start of the batch
	ValueLen      uint32 // length of the value
	AttrLen       uint32 // length of the attributes after the value
	// The record header's fields a lookup reports, so that it need not decode the header.
	Sum         uint32
	CTime       int64
	Version     uint64
	Expires     int64
	ClientFlags uint32
	Codec       uint8  // how the value is stored (record.Header.Codec)
	DataLen     uint32 // the value's length once decompressed, with a codec
	// Hits is the hit count the record's index entry starts with once committed (a record
	// written again keeps part of its count); set by SetLastHits.
	Hits uint8
}

// Batch is one write buffer. See the package documentation for the rules.
type Batch struct {
	// Stream is its owner's label for the write stream the batch belongs to (the cache's
	// region). The batch never reads it; Reset keeps it.
	Stream int

	limit  int64
	direct bool

	mu      sync.RWMutex
	bufs    [][]byte // the stream
	offs    []int64  // offs[i] is the stream offset of bufs[i]
	size    int64    // stream length
	entries []Entry
	pending map[uint64]int32 // key hash -> index of its newest entry
	// pendingPeak is the most keys pending has held: a map keeps its room after clear.
	pendingPeak int

	// holds has a bit set for the key hash of every record appended since the last Reset
	// (holdsBit), set under mu before the record is indexed in pending and cleared only by
	// Reset. Lookups read it without mu: a clear bit means the batch holds no record of the key,
	// and the lookup takes no lock (the reads of keys a batch does not hold, nearly all of them,
	// neither wait for an Append's copy nor share a lock's cache line).
	holds [holdsWords]atomic.Uint64

	// held[i] is what the owner attached to record i (SetLastHeld) and has not taken back
	// (TakeHeld); shorter than entries when the last records have nothing. Only the goroutine
	// that appends, or the one the batch was handed to after its last Append, touches it.
	held []any

	chunks [][]byte // arena chunks, kept across Reset
	fill   [][]byte // the arena an Append reserved and fills outside mu, reused
	cur    int      // chunk being filled
	used   int      // bytes used in chunks[cur]
	sealed bool
}

// holdsWords is the size of Batch.holds in 64-bit words: 65,536 bits, 8 KiB a batch. A batch
// of 4 KiB values in a 16 MiB write buffer sets about one bit in 16.
const holdsWords = 1024

// holdsBit is the word and the bit of Batch.holds for key hash h: its top 16 bits, 10 for the
// word and 6 for the bit.
func holdsBit(h uint64) (word int, bit uint64) {
	i := h >> 48
	return int(i >> 6), 1 << (i & 63)
}

// mayHold reports whether the batch may hold a record of a key with hash h: false is certain.
// It takes no lock.
func (b *Batch) mayHold(h uint64) bool {
	w, bit := holdsBit(h)
	return b.holds[w].Load()&bit != 0
}

// New returns an empty batch that holds at most limit bytes of records. In direct mode the
// arena is one aligned buffer with room for the final padding.
func New(limit int64, direct bool) *Batch {
	b := &Batch{limit: limit, direct: direct, pending: make(map[uint64]int32)}
	if direct {
		b.chunks = [][]byte{vfs.AlignedBuffer(int(limit) + 2*vfs.DirectIOAlignment)}
	}
	return b
}

// Size is the number of bytes of records appended so far. Unlike Fits, it may be called
// concurrently with Append.
func (b *Batch) Size() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.size
}

// Capacity is the memory the batch holds, used or not, all of it kept across Reset: its arena
// (in direct mode, one buffer of the limit) and what indexes its records (their entries and the
// map of their hashes; a batch of small records holds many). Safe to call concurrently with
// Append.
func (b *Batch) Capacity() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var n int64
	for _, c := range b.chunks {
		n += int64(len(c))
	}
	return n + int64(cap(b.entries))*int64(unsafe.Sizeof(Entry{})) + int64(b.pendingPeak)*mapSlotBytes
}

// mapSlotBytes is about what a map[uint64]int32 takes per key: a 16-byte slot and its control
// byte, at the load its tables keep. An estimate (the runtime does not say), for Capacity.
const mapSlotBytes = 20

// Len is the number of records appended so far.
func (b *Batch) Len() int { return len(b.entries) }

// Fits reports whether a record of n bytes fits in the batch.
func (b *Batch) Fits(n int64) bool { return b.size+n <= b.limit }

// SetLastHits sets the Hits of the record appended last.
func (b *Batch) SetLastHits(n uint8) {
	b.mu.Lock()
	b.entries[len(b.entries)-1].Hits = n
	b.mu.Unlock()
}

// SetLastHeld attaches v to the record appended last, for the batch's owner to take back
// (TakeHeld) when it commits the batch or lets it go. Reset forgets what was not taken back: the
// owner takes everything back first.
func (b *Batch) SetLastHeld(v any) {
	i := len(b.entries) - 1
	for len(b.held) <= i {
		b.held = append(b.held, nil)
	}
	b.held[i] = v
}

// TakeHeld returns what SetLastHeld attached to record i and detaches it; nil if nothing is
// attached.
func (b *Batch) TakeHeld(i int) any {
	if i >= len(b.held) {
		return nil
	}
	v := b.held[i]
	b.held[i] = nil
	return v
}

// Append encodes a record at the end of the batch. h is the key hash; hdr.KeyLen,
// hdr.ValueLen and hdr.AttrLen must match key, value and attrs (the attributes, copied after
// the value). If copyValue is false (and the batch is not in direct mode) the batch keeps a
// reference to value instead of copying it. The caller checked Fits.
func (b *Batch) Append(h uint64, hdr record.Header, key, value, attrs []byte, copyValue bool) {
	if b.sealed {
		panic("batch: Append after Seal")
	}
	n := record.HeaderSize + len(key)
	copied := copyValue || b.direct
	// The record's arena is taken under the lock and filled outside it: lookups find a record only
	// once it is indexed (below), after its bytes are in place, and the lookups of other records
	// do not wait for the copy. Appends are serialized by the caller: no other goroutine
	// writes the batch meanwhile.
	b.mu.Lock()
	if pad := b.alignPad(n, len(value)); pad > 0 {
		record.EncodePad(b.reserve(pad))
	}
	off := b.size
	hk := b.reserve(n)
	fill := b.fill[:0]
	if copied {
		fill = b.reserveFor(fill, len(value))
	} else if len(value) > 0 {
		b.push(value)
	}
	nv := len(fill) // fill[:nv] is the value's room, fill[nv:] the attributes'
	fill = b.reserveFor(fill, len(attrs))
	b.mu.Unlock()
	hdr.Encode(hk, key)
	copy(hk[record.HeaderSize:], key)
	scatter(fill[:nv], value)
	scatter(fill[nv:], attrs)
	clear(fill)
	b.fill = fill[:0]
	b.mu.Lock()
	b.entries = append(b.entries, Entry{
		Entry: segment.Entry{
			Hash:   h,
			Offset: uint32(off),
			Length: uint32(int64(n) + int64(len(value)) + int64(len(attrs))),
			Kind:   hdr.Kind,
			Flags:  hdr.Flags,
		},
		ValueLen:    uint32(len(value)),
		AttrLen:     uint32(len(attrs)),
		Sum:         hdr.Sum,
		CTime:       hdr.CTime,
		Version:     hdr.Version,
		Expires:     hdr.Expires,
		ClientFlags: hdr.ClientFlags,
		Codec:       hdr.Codec,
		DataLen:     hdr.DataLen,
	})
	w, bit := holdsBit(h)
	b.holds[w].Or(bit)
	b.pending[h] = int32(len(b.entries) - 1)
	b.pendingPeak = max(b.pendingPeak, len(b.pending))
	b.mu.Unlock()
}

// AlignedValueMin is the smallest value that a direct-mode batch places at a multiple of
// vfs.DirectIOAlignment in its stream (and so in the segment: direct batches are written at
// aligned offsets), after a pad record, when the pad fits: a direct read then lands the value in
// an aligned buffer with no copy. The pad costs at most 4 KiB + 32 bytes, under 3.2% of such a
// value.
const AlignedValueMin = 128 << 10

// alignPad is the length of the pad record that puts a value of vlen bytes, after hk bytes of
// header and key, at an aligned stream offset; 0 for none (not direct mode, a smaller value,
// already aligned, or no room).
func (b *Batch) alignPad(hk, vlen int) int {
	if !b.direct || vlen < AlignedValueMin {
		return 0
	}
	pad := record.PadLen(b.size+int64(hk), vfs.DirectIOAlignment)
	if b.size+pad+int64(hk+vlen) > b.limit {
		return 0
	}
	return int(pad)
}

// room is the free space of the current chunk, after moving to a new chunk if it is full.
func (b *Batch) room() int {
	if b.cur < len(b.chunks) && b.used < len(b.chunks[b.cur]) {
		return len(b.chunks[b.cur]) - b.used
	}
	b.nextChunk()
	return len(b.chunks[b.cur]) - b.used
}

func (b *Batch) nextChunk() {
	if b.cur < len(b.chunks) && b.used > 0 {
		b.cur++
		b.used = 0
	}
	if b.cur == len(b.chunks) {
		if b.direct {
			panic("batch: direct arena overflow")
		}
		b.chunks = append(b.chunks, make([]byte, chunkSize))
	}
}

// scatter copies src into the pieces of dst, in order; they add up to its length.
func scatter(dst [][]byte, src []byte) {
	for _, p := range dst {
		src = src[copy(p, src):]
	}
}

// reserveFor appends to fill the arena for n more bytes of the stream, a chunk's worth at a
// time, and returns it.
func (b *Batch) reserveFor(fill [][]byte, n int) [][]byte {
	for n > 0 {
		p := b.reserve(min(n, b.room()))
		fill = append(fill, p)
		n -= len(p)
	}
	return fill
}

// reserve returns n contiguous bytes of arena appended to the stream. n must fit in a chunk.
func (b *Batch) reserve(n int) []byte {
	if b.cur >= len(b.chunks) || len(b.chunks[b.cur])-b.used < n {
		b.nextChunk()
	}
	c := b.chunks[b.cur]
	p := c[b.used : b.used+n : b.used+n]
	// Extend the last buffer when it ends exactly where p starts in the same chunk.
	if k := len(b.bufs) - 1; k >= 0 && b.lastInArena(k, c, b.used) {
		b.bufs[k] = c[b.used-len(b.bufs[k]) : b.used+n]
	} else {
		b.bufs = append(b.bufs, p)
		b.offs = append(b.offs, b.size)
	}
	b.used += n
	b.size += int64(n)
	return p
}

// lastInArena reports whether bufs[k] is the slice of chunk c that ends at end.
func (b *Batch) lastInArena(k int, c []byte, end int) bool {
	last := b.bufs[k]
	if len(last) == 0 || len(last) > end || cap(c) < end {
		return false
	}
	return &c[end-len(last)] == &last[0]
}

func (b *Batch) push(p []byte) {
	b.bufs = append(b.bufs, p)
	b.offs = append(b.offs, b.size)
	b.size += int64(len(p))
}

// SealedSize is the length Seal will return: the records and, in direct mode, the pad that
// aligns them.
func (b *Batch) SealedSize() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sealed && b.direct {
		return b.size + record.PadLen(b.size, vfs.DirectIOAlignment)
	}
	return b.size
}

// Seal ends the batch and returns the buffers to write and their total length. In direct mode
// the stream is padded with a pad record to a multiple of the direct-I/O alignment.
func (b *Batch) Seal() (bufs [][]byte, length int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sealed && b.direct {
		if pad := record.PadLen(b.size, vfs.DirectIOAlignment); pad > 0 {
			record.EncodePad(b.reserve(int(pad)))
		}
	}
	b.sealed = true
	return b.bufs, b.size
}

// Entries returns the records of the batch in order. The slice is owned by the batch.
func (b *Batch) Entries() []Entry { return b.entries }

// Value is what Lookup finds for a key still in a batch.
type Value struct {
	Kind        record.Kind
	Flags       uint8
	Sum         uint32
	CTime       int64
	Version     uint64
	Expires     int64
	ClientFlags uint32
	// Codec and DataLen are the record header's: with a codec, Value and Length are the
	// stored (compressed) bytes and DataLen the value's length once decompressed.
	Codec   uint8
	DataLen uint32
	Value   []byte // a copy, owned by the caller
	Length  int64  // length of the value
	Attrs   []byte // a copy of the attributes (nil without)
}

// Lookup finds the newest record of key in the batch, without its value. found is false if the
// batch has no record for the key.
func (b *Batch) Lookup(h uint64, key []byte) (v Value, found bool) {
	v, _, found = b.LookupInto(h, key, nil)
	return v, found
}

// LookupInto is Lookup with the value, when take is not nil: its bytes are copied into the
// buffer take returns for their length (called once, under the batch's lock, for a record with
// a value), which comes back beside v for the caller to keep or give back; nil for a record
// without a value. The attributes are a copy either way.
func (b *Batch) LookupInto(h uint64, key []byte, take func(n int) *[]byte) (v Value, buf *[]byte, found bool) {
	if !b.mayHold(h) {
		return Value{}, nil, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.find(h, key)
	if !ok {
		return Value{}, nil, false
	}
	v = e.value()
	if take != nil && e.ValueLen > 0 {
		buf = take(int(e.ValueLen))
		v.Value = (*buf)[:e.ValueLen]
		b.copyAt(v.Value, e.valueOff(0))
	}
	v.Attrs = b.attrs(e)
	return v, buf, true
}

// attrs returns a copy of entry e's attributes, nil if it has none. The caller holds b.mu.
func (b *Batch) attrs(e Entry) []byte {
	if e.AttrLen == 0 {
		return nil
	}
	a := make([]byte, e.AttrLen)
	b.copyAt(a, e.valueOff(int64(e.ValueLen)))
	return a
}

// ReadValue finds the newest record of key in the batch, like Lookup, and copies the bytes
// [off, off+len(p)) of its value into p instead of into a new slice; n is how many there were
// (fewer than len(p) when the value ends first). It does not allocate. A compressed value
// (v.Codec set) is not copied: n is 0, and the caller decompresses it from Lookup's bytes.
func (b *Batch) ReadValue(h uint64, key, p []byte, off int64) (v Value, n int, found bool) {
	if !b.mayHold(h) {
		return Value{}, 0, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, ok := b.find(h, key)
	if !ok {
		return Value{}, 0, false
	}
	if off < int64(e.ValueLen) && e.Codec == 0 {
		n = int(min(int64(len(p)), int64(e.ValueLen)-off))
		b.copyAt(p[:n], e.valueOff(off))
	}
	return e.value(), n, true
}

// find returns the newest entry of key (hash h). The key is compared in place, in a stack
// buffer: decoding the header with record.Decode would move the buffer to the heap, and the
// entry holds what the header says. The caller holds b.mu.
func (b *Batch) find(h uint64, key []byte) (Entry, bool) {
	i, ok := b.pending[h]
	if !ok {
		return Entry{}, false
	}
	e := b.entries[i]
	if e.keyLen() != len(key) {
		return Entry{}, false
	}
	var kb [record.MaxKeyLen]byte
	b.copyAt(kb[:len(key)], int64(e.Offset)+record.HeaderSize)
	if string(kb[:len(key)]) != string(key) {
		return Entry{}, false // another key with the same hash: not ours
	}
	return e, true
}

func (e *Entry) keyLen() int { return int(e.Length-e.ValueLen-e.AttrLen) - record.HeaderSize }

// valueOff is the stream offset of byte off of the entry's value.
func (e *Entry) valueOff(off int64) int64 {
	return int64(e.Offset) + record.HeaderSize + int64(e.keyLen()) + off
}

func (e *Entry) value() Value {
	return Value{Kind: e.Kind, Flags: e.Flags, Sum: e.Sum, CTime: e.CTime, Version: e.Version,
		Expires: e.Expires, ClientFlags: e.ClientFlags, Codec: e.Codec, DataLen: e.DataLen, Length: int64(e.ValueLen)}
}

// copyAt copies len(dst) bytes of the stream starting at off. The caller holds b.mu.
func (b *Batch) copyAt(dst []byte, off int64) {
	i := sort.Search(len(b.offs), func(i int) bool { return b.offs[i] > off }) - 1
	for len(dst) > 0 {
		n := copy(dst, b.bufs[i][off-b.offs[i]:])
		dst = dst[n:]
		off += int64(n)
		i++
	}
}

// Reset empties the batch for reuse, keeping its arena.
func (b *Batch) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.bufs)
	b.bufs = b.bufs[:0]
	b.offs = b.offs[:0]
	b.entries = b.entries[:0]
	clear(b.held)
	b.held = b.held[:0]
	clear(b.pending)
	for i := range b.holds {
		b.holds[i].Store(0)
	}
	b.size = 0
	b.cur = 0
	b.used = 0
	b.sealed = false
}

// HasHash reports whether the batch holds a record of a key with hash h.
func (b *Batch) HasHash(h uint64) bool {
	if !b.mayHold(h) {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.pending[h]
	return ok
}

// ForEachHash calls fn with the key hash of every record in the batch.
func (b *Batch) ForEachHash(fn func(h uint64)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for i := range b.entries {
		fn(b.entries[i].Hash)
	}
}

// RecordBytes returns the bytes of entry i (header, key, value and attributes) in one slice: a
// slice of the stream when the record lies in one chunk (valid until Reset), else a copy in
// scratch, grown as needed.
func (b *Batch) RecordBytes(i int, scratch []byte) []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.entries[i]
	off, n := int64(e.Offset), int64(e.Length)
	j := sort.Search(len(b.offs), func(j int) bool { return b.offs[j] > off }) - 1
	if p := b.bufs[j][off-b.offs[j]:]; int64(len(p)) >= n {
		return p[:n:n]
	}
	scratch = slices.Grow(scratch[:0], int(n))[:n]
	b.copyAt(scratch, off)
	return scratch
}

// Record returns the bytes of entry i (header, key and value) as slices of the stream, for
// writing it on its own. The slices alias the batch; they are valid until Reset.
func (b *Batch) Record(i int) [][]byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.entries[i]
	off, end := int64(e.Offset), int64(e.Offset)+int64(e.Length)
	j := sort.Search(len(b.offs), func(j int) bool { return b.offs[j] > off }) - 1
	var out [][]byte
	for off < end {
		p := b.bufs[j][off-b.offs[j]:]
		p = p[:min(int64(len(p)), end-off)]
		out = append(out, p)
		off += int64(len(p))
		j++
	}
	return out
}

// Key returns a copy of the key of entry i.
func (b *Batch) Key(i int) []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.entries[i]
	key := make([]byte, e.keyLen())
	b.copyAt(key, int64(e.Offset)+record.HeaderSize)
	return key
}
