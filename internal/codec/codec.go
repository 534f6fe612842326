package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

// Codec says how a stored value is compressed.
type Codec uint8

const (
	// None: the value is stored as given.
	None Codec = 0
	// Zstd: blocks are zstd frames made at zstd's fastest level.
	Zstd Codec = 1
	// S2: blocks are s2 blocks (klauspost/compress/s2, a faster, Snappy-like format).
	S2 Codec = 2
)

func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Zstd:
		return "zstd"
	case S2:
		return "s2"
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

// BlockSize is the length of every block of a value but its last. It bounds what a range read
// decompresses to reach one byte, and what a block's compression can learn from; docs/DESIGN.md
// ("Compressed values") has the measurement it was chosen by.
const BlockSize = 256 << 10

// MinValue is the shortest value Compress compresses: below it the table and the frames cost
// more than compression saves.
const MinValue = 1 << 10

// sampleLen is how much of a value Compress tries with s2 first to tell whether it compresses.
const sampleLen = 4 << 10

// ErrCorrupt is wrapped by every error about damage found in stored bytes; it is
// corruption.ErrCorrupt, the one marker of damaged bytes.
var ErrCorrupt = corruption.ErrCorrupt

var errCodec = errors.New("codec: unknown codec")

// Stored form of a compressed value of n bytes in m = ceil(n / BlockSize) blocks, little-endian.
// The table is a zstd skippable frame; the blocks follow it, each a zstd frame or an s2 block.
//
//	table:  0          4            8             12            16
//	        +----------+------------+-------------+-------------+---- m entries ----+-----------+
//	        | magic    | frame len  | value len n | block size  | end_i  | crc_i    | table crc |
//	        | 184D2A5E | 12 + 8m    | uint32      | uint32      | uint32 | uint32   | uint32    |
//	        +----------+------------+-------------+-------------+--------+----------+-----------+
//	blocks: | block 0 | block 1 | ... | block m-1 |
//
// end_i is where block i's stored bytes end, counted from the end of the table; block i starts
// at end_{i-1} (0 for block 0). crc_i is the CRC-32C of block i's stored bytes; the table crc
// covers bytes 8 up to it (value length, block size and the entries).
const (
	tableMagic  = 0x184D2A5E // a zstd skippable frame's magic (0x184D2A50..5F)
	tableFixed  = 16         // bytes before the entries
	entrySize   = 8
	tableSuffix = 4 // the table crc
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Update(0, castagnoli, b) }

// TableLen returns the length of the table of a value of n bytes.
func TableLen(n int64) int64 { return tableFixed + entrySize*blocks(n) + tableSuffix }

func blocks(n int64) int64 { return (n + BlockSize - 1) / BlockSize }

// MaxStored bounds the stored form of a value of n bytes, for sizing a buffer before Compress.
func MaxStored(n int) int {
	m := int(blocks(int64(n)))
	per := max(s2.MaxEncodedLen(BlockSize), BlockSize+BlockSize/128+64) // zstd's worst case is raw blocks plus headers
	return int(TableLen(int64(n))) + m*per
}

// Compressor compresses values with one codec.
type Compressor struct {
	codec Codec
	zenc  *zstd.Encoder
}

// NewCompressor returns a compressor for codec (Zstd or S2).
func NewCompressor(c Codec) (*Compressor, error) {
	cp := &Compressor{codec: c}
	switch c {
	case Zstd:
		enc, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(false), // the table's CRC-32C covers each frame
			zstd.WithLowerEncoderMem(true),
			zstd.WithWindowSize(BlockSize),
			zstd.WithSingleSegment(true))
		if err != nil {
			return nil, fmt.Errorf("codec: zstd encoder: %w", err)
		}
		cp.zenc = enc
	case S2:
	default:
		return nil, fmt.Errorf("%w: %d", errCodec, uint8(c))
	}
	return cp, nil
}

// Codec returns the codec c compresses with.
func (c *Compressor) Codec() Codec { return c.codec }

// samplePool holds s2's output for the sample.
var samplePool = sync.Pool{New: func() any { b := make([]byte, s2.MaxEncodedLen(sampleLen)); return &b }}

// compressible reports whether value is worth compressing: long enough, and a sample of it
// (sampleLen bytes from its middle) shrinks by a sixteenth under s2. It costs a small fraction
// of a copy of the value.
func compressible(value []byte) bool {
	if len(value) < MinValue {
		return false
	}
	s := value
	if len(s) > sampleLen {
		mid := len(s)/2 - sampleLen/2
		s = s[mid : mid+sampleLen]
	}
	bp := samplePool.Get().(*[]byte)
	out := s2.Encode(*bp, s)
	samplePool.Put(bp)
	return len(out) <= len(s)-len(s)/16
}

// Compress appends the stored form of value to dst and returns it with true, or returns dst
// unchanged and false when value is not worth compressing (see compressible) or did not shrink
// by a thirty-second once compressed: the caller then stores value as given.
func (c *Compressor) Compress(dst, value []byte) ([]byte, bool) {
	if !compressible(value) {
		return dst, false
	}
	n := int64(len(value))
	start := len(dst)
	tl := int(TableLen(n))
	if cap(dst)-start < MaxStored(len(value)) {
		grown := make([]byte, start, start+MaxStored(len(value)))
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+tl]
	m := int(blocks(n))
	binary.LittleEndian.PutUint32(dst[start:], tableMagic)
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(tl-8))
	binary.LittleEndian.PutUint32(dst[start+8:], uint32(n))
	binary.LittleEndian.PutUint32(dst[start+12:], BlockSize)
	data := start + tl
	for i := 0; i < m; i++ {
		blk := value[i*BlockSize : min(len(value), (i+1)*BlockSize)]
		from := len(dst)
		switch c.codec {
		case Zstd:
			dst = c.zenc.EncodeAll(blk, dst)
		case S2:
			out := s2.Encode(dst[from:cap(dst)], blk)
			dst = dst[:from+len(out)]
		}
		e := start + tableFixed + i*entrySize
		binary.LittleEndian.PutUint32(dst[e:], uint32(len(dst)-data))
		binary.LittleEndian.PutUint32(dst[e+4:], crc(dst[from:]))
	}
	tc := start + tableFixed + m*entrySize
	binary.LittleEndian.PutUint32(dst[tc:], crc(dst[start+8:tc]))
	if int64(len(dst)-start) > n-n/32 {
		return dst[:start], false
	}
	return dst, true
}

// Table is the decoded block table of a stored value.
type Table struct {
	n       int64  // the value's length
	entries []byte // m entries, as stored
}

// headLen returns how many bytes of a stored value ParseTable needs, given at least its first 8.
func headLen(b []byte) (int64, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("%w: %d bytes, a table needs 8 to start", ErrCorrupt, len(b))
	}
	if m := binary.LittleEndian.Uint32(b); m != tableMagic {
		return 0, fmt.Errorf("%w: table magic %#08x, want %#08x", ErrCorrupt, m, uint32(tableMagic))
	}
	fl := int64(binary.LittleEndian.Uint32(b[4:]))
	if fl < tableFixed-8+tableSuffix || (fl-(tableFixed-8+tableSuffix))%entrySize != 0 {
		return 0, fmt.Errorf("%w: table frame of %d bytes", ErrCorrupt, fl)
	}
	return 8 + fl, nil
}

// ParseTable decodes and checks the table at the start of stored, a stored value of storedLen
// bytes in all that decompresses to n bytes (both from the record's header). stored must hold
// the table (see headLen); the bytes after it are not looked at.
func ParseTable(stored []byte, storedLen, n int64) (Table, error) {
	tl, err := headLen(stored)
	if err != nil {
		return Table{}, err
	}
	if n <= 0 || tl != TableLen(n) {
		return Table{}, fmt.Errorf("%w: a table of %d bytes for a value of %d", ErrCorrupt, tl, n)
	}
	if int64(len(stored)) < tl || storedLen < tl {
		return Table{}, fmt.Errorf("%w: %d bytes, the table needs %d", ErrCorrupt, min(int64(len(stored)), storedLen), tl)
	}
	tc := tl - tableSuffix
	if want, got := binary.LittleEndian.Uint32(stored[tc:]), crc(stored[8:tc]); want != got {
		return Table{}, fmt.Errorf("%w: table checksum %#08x, computed %#08x", ErrCorrupt, want, got)
	}
	if v := int64(binary.LittleEndian.Uint32(stored[8:])); v != n {
		return Table{}, fmt.Errorf("%w: the table says %d bytes, the record %d", ErrCorrupt, v, n)
	}
	if bs := binary.LittleEndian.Uint32(stored[12:]); bs != BlockSize {
		return Table{}, fmt.Errorf("%w: block size %d, this build reads %d", ErrCorrupt, bs, BlockSize)
	}
	t := Table{n: n, entries: stored[tableFixed:tc]}
	prev := int64(0)
	for i := range t.Blocks() {
		end := t.end(i)
		if end <= prev {
			return Table{}, fmt.Errorf("%w: block %d ends at %d, before its start %d", ErrCorrupt, i, end, prev)
		}
		prev = end
	}
	if tl+prev != storedLen {
		return Table{}, fmt.Errorf("%w: table and blocks make %d bytes, the record holds %d", ErrCorrupt, tl+prev, storedLen)
	}
	return t, nil
}

// Len returns the length of the table itself: its blocks start there.
func (t Table) Len() int64 { return TableLen(t.n) }

// Blocks returns the number of blocks.
func (t Table) Blocks() int { return len(t.entries) / entrySize }

func (t Table) end(i int) int64 { return int64(binary.LittleEndian.Uint32(t.entries[i*entrySize:])) }

// Cover returns the blocks [first, last] that hold value bytes [off, end) (off < end <= n).
func (t Table) Cover(off, end int64) (first, last int) {
	return int(off / BlockSize), int((end - 1) / BlockSize)
}

// Span returns where the stored bytes of blocks [first, last] lie, from the start of the stored
// value.
func (t Table) Span(first, last int) (start, end int64) {
	if first > 0 {
		start = t.end(first - 1)
	}
	return t.Len() + start, t.Len() + t.end(last)
}

// blockLen is the length block i decompresses to.
func (t Table) blockLen(i int) int64 { return min(BlockSize, t.n-int64(i)*BlockSize) }

// zdec decodes zstd blocks; its DecodeAll is safe for concurrent use. Made on first use.
var zdec = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithDecoderMaxMemory(BlockSize),
		zstd.WithDecoderMaxWindow(BlockSize),
		zstd.IgnoreChecksum(true))
})

// scratchPool holds one block's decompressed bytes, for a block a range covers in part.
var scratchPool = sync.Pool{New: func() any { b := make([]byte, BlockSize); return &b }}

// Decode fills dst with value bytes [off, off+len(dst)) from span, the stored bytes of blocks
// [first, last] as Span gives them, which must cover the range. Each block is checked against
// its CRC-32C before it is decompressed, and must decompress to its exact length.
func (t Table) Decode(c Codec, dst []byte, off int64, span []byte, first, last int) error {
	end := off + int64(len(dst))
	if len(dst) == 0 {
		return nil
	}
	if off < 0 || end > t.n {
		return fmt.Errorf("codec: range [%d, %d) of a %d-byte value", off, end, t.n)
	}
	if f, l := t.Cover(off, end); f < first || l > last {
		return fmt.Errorf("codec: blocks %d..%d given for a range in %d..%d", first, last, f, l)
	}
	base, _ := t.Span(first, first)
	for i := int(off / BlockSize); i <= int((end-1)/BlockSize); i++ {
		s, e := t.Span(i, i)
		s, e = s-base, e-base
		if e > int64(len(span)) {
			return fmt.Errorf("codec: %d stored bytes given, block %d ends at %d", len(span), i, e)
		}
		blk := span[s:e]
		if want, got := binary.LittleEndian.Uint32(t.entries[i*entrySize+4:]), crc(blk); want != got {
			return fmt.Errorf("%w: block %d checksum %#08x, computed %#08x", ErrCorrupt, i, want, got)
		}
		bstart := int64(i) * BlockSize
		blen := t.blockLen(i)
		from, to := max(off, bstart), min(end, bstart+blen) // the part of dst this block fills
		out := dst[from-off : to-off]
		whole := from == bstart && to == bstart+blen
		var sp *[]byte
		if !whole {
			sp = scratchPool.Get().(*[]byte)
			out = (*sp)[:blen]
		}
		err := decodeBlock(c, out, blk)
		if err == nil && !whole {
			copy(dst[from-off:to-off], out[from-bstart:to-bstart])
		}
		if sp != nil {
			scratchPool.Put(sp)
		}
		if err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}

// decodeBlock decompresses blk into out, which it must fill exactly.
func decodeBlock(c Codec, out, blk []byte) error {
	switch c {
	case Zstd:
		dec, err := zdec()
		if err != nil {
			return fmt.Errorf("codec: zstd decoder: %w", err)
		}
		got, err := dec.DecodeAll(blk, out[:0:len(out)])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if len(got) != len(out) || len(got) > 0 && &got[0] != &out[0] {
			return fmt.Errorf("%w: a block of %d bytes decompressed to %d", ErrCorrupt, len(out), len(got))
		}
	case S2:
		n, err := s2.DecodedLen(blk)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if n != len(out) {
			return fmt.Errorf("%w: a block of %d bytes says it holds %d", ErrCorrupt, len(out), n)
		}
		got, err := s2.Decode(out, blk)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if len(got) != len(out) {
			return fmt.Errorf("%w: a block of %d bytes decompressed to %d", ErrCorrupt, len(out), len(got))
		}
	default:
		return fmt.Errorf("%w: %d", errCodec, uint8(c))
	}
	return nil
}

// DecodeAll decompresses a whole stored value of n bytes into dst (len(dst) == n).
func DecodeAll(c Codec, dst, stored []byte) error {
	t, err := ParseTable(stored, int64(len(stored)), int64(len(dst)))
	if err != nil {
		return err
	}
	return t.Decode(c, dst, 0, stored[t.Len():], 0, t.Blocks()-1)
}
