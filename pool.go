package blobcache

import (
	"math/bits"
	"sync"

	"github.com/seed57392e9e/blobcache/internal/bufmem"
	"github.com/seed57392e9e/blobcache/internal/codec"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/sizeclass"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Buffers are pooled by size class, from 4 KiB to 4 MiB: 4 KiB, then four classes per power of
// two (2^k·5/4, ·6/4, ·7/4 and 2^(k+1)). The read path's own buffers (getBuf) take only the
// powers of two; GetBuffer takes any class, so a caller's buffer wastes at most a fifth of its
// capacity. A power-of-two buffer is in the same pool for both. Every buffer made is counted in
// bufmem until the collector frees it (Stats.ReadBufferBytes), whoever took it. Buffers larger
// than the largest class are made for each use, counted too, and not pooled.
const (
	minBufShift = 12
	maxBufShift = 22
)

var bufPools [1 + (maxBufShift-minBufShift)*4]sync.Pool

// bufClasses are the pools' size classes (internal/sizeclass).
var bufClasses = sizeclass.Classes{Min: minBufShift, Max: maxBufShift}

// bufClass returns the pool index and the capacity of the smallest class of at least n bytes;
// the index is -1, and the capacity n, past the largest class.
func bufClass(n int) (idx, size int) { return bufClasses.Of(n) }

// bufSize is the capacity of the buffer getBuf(n) returns: n rounded up to a power of two of
// at least 4 KiB, or n itself past the largest class.
func bufSize(n int) int {
	if n <= 1<<minBufShift {
		return 1 << minBufShift
	}
	if size := 1 << bits.Len(uint(n-1)); size <= 1<<maxBufShift {
		return size
	}
	return n
}

// getBuf returns a buffer of length n and capacity bufSize(n).
func getBuf(n int) *[]byte { return takeBuf(n, bufSize(n)) }

// takeBuf returns a buffer of length n and capacity size, which is either a class's (the
// buffer comes from its pool when it has one) or n past the largest class.
func takeBuf(n, size int) *[]byte {
	idx, _ := bufClass(size)
	if idx < 0 {
		b := make([]byte, n)
		bufmem.Track(&b, n)
		return &b
	}
	if p, ok := bufPools[idx].Get().(*[]byte); ok {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, size)
	bufmem.Track(&b, size)
	return &b
}

// putBuf gives back a buffer from getBuf or GetBuffer; one whose capacity is not a class's is
// left to the collector.
func putBuf(p *[]byte) {
	if idx, size := bufClass(cap(*p)); idx >= 0 && size == cap(*p) {
		bufPools[idx].Put(p)
	}
}

// GetBuffer returns a buffer of length n from the pools the cache's read path takes its buffers
// from, for a caller that holds blob bytes of its own (a server's copy of a blob on its way to a
// client). Its capacity is BufferSize(n). It is counted in Stats.ReadBufferBytes from when it is
// made until the garbage collector frees it, like the cache's own read buffers: the pools are
// shared, a buffer given back by one is taken by the other, so one figure counts them all. Hand
// it back with PutBuffer. Safe for concurrent use.
func GetBuffer(n int) *[]byte {
	_, size := bufClass(n)
	return takeBuf(n, size)
}

// PutBuffer gives back a buffer from GetBuffer; the caller must not use it afterwards. A buffer
// whose capacity is not that of a size class (past the largest, or another slice) is left to the
// garbage collector.
func PutBuffer(b *[]byte) { putBuf(b) }

// BufferSize returns the capacity of the buffer GetBuffer(n) returns: the memory it holds. That
// is n rounded up to its size class, 4 KiB or else the next of four steps per power of two
// (2^k·5/4, ·6/4, ·7/4, 2^(k+1)), or n itself past 4 MiB, where buffers are not pooled.
//
// The classes are finer than the powers of two the cache's own buffers come in, so that a
// caller's buffer for a value just over a power of two (100 KiB) does not hold nearly twice
// the value: a caller that budgets its memory by BufferSize admits more requests for the same
// budget. The cost is more pools, which keep more idle buffers and miss more often for values
// of mixed sizes.
func BufferSize(n int) int {
	_, size := bufClass(n)
	return size
}

// ReadMemory returns the most memory, in bytes, that a Reader of this cache holds in buffers for
// a blob of size value bytes under a key of keyLen bytes with attrLen bytes of attributes, from
// when Get, GetRange or Open returns it until it is closed or has delivered its last byte, read
// with Read. It is computed as the read path plans its reads: the whole record in one buffer
// when it is read with one positioned read (a small record, or one that may enter the memory
// tier), else its header, key and first chunk of value (a streamed blob); with direct reads, room to align the read, or a chunk of the Reader's own when
// it streams from a smaller buffer. It is a bound: where a record lies changes the alignment
// room, and a blob still in a write buffer is read from there, with no buffer. WriteTo, when it
// copies value bytes through memory rather than having the kernel send them, uses one chunk
// more for the copy.
//
// With Options.Compression a value may be stored compressed: its read also holds the value
// decompressed, and its stored bytes beyond the first read.
//
// A caller that reads a blob to the end into its own buffer before it writes anything holds
// this memory only until that read returns; one that takes the bytes where they lie
// (Reader.Buffered), or streams the blob to a client, holds it for as long as the client takes.
func (c *Cache) ReadMemory(keyLen, attrLen int, size int64) int64 {
	// As openRecord plans the first read (read.go).
	prefix := int64(record.HeaderSize + keyLen)
	length := prefix + size + int64(attrLen)
	first := length
	if first > smallRecord && !(c.mem != nil && c.mem.Fits(length+memtier.EntryOverhead)) {
		// Read in pieces, unless the whole record may be read to enter the memory tier
		// (memory.go).
		first = prefix + min(size, streamChunk)
	}
	// As hitFile routes it (readroute.go): a read of the whole record, for the largest buffer.
	direct := c.opts.DirectIOReads ||
		(!c.opts.BufferedReads && !c.opts.PerBlobFiles && length >= routedReadMin)
	skew := int64(0)
	if direct && first >= 2*vfs.DirectIOAlignment {
		skew = vfs.DirectIOAlignment - 1 // the most a record can be past an aligned offset
	}
	held := int64(bufSize(int(first + skew)))
	if direct && first < length {
		// Bytes are left in the file after the first read (a direct read is never Open's
		// header-only one): a direct Read into a smaller slice than a chunk reads a chunk into
		// the Reader's own buffer (Reader.Read), which replaces the first.
		held = max(held, int64(bufSize(streamChunk)))
	}
	if c.compresses(size) {
		// A compressed value is decompressed into a buffer of its own size, from its stored
		// bytes read into another when the first read did not bring them all (compress.go).
		held += int64(bufSize(int(size))) + int64(bufSize(codec.MaxStored(int(size))))
	}
	return held
}

// WriteBufferSize is the size of one write batch (Options.WriteBufferSize once defaults are
// applied). PutFrom may read a value up to it whole (see PutFromMemory), and a value up to it may
// be stored compressed, so PutFromMemory and ReadMemory are not largest at the largest value: a
// caller that bounds the memory of its requests asks them at this size too.
func (c *Cache) WriteBufferSize() int64 { return c.opts.WriteBufferSize }

// PutFromMemory returns the memory, in bytes, that PutFrom (or PutFromWith) of a value of size
// bytes holds while it reads the value. A value it reads whole (up to StreamThreshold; any value
// in the one-file-per-blob mode; with Options.Compression, any a write buffer holds) takes a
// read-path buffer, size rounded up to a power of two of at least 4 KiB (not BufferSize's finer
// classes; size itself past 4 MiB), and with compression a second one for its compressed form.
// A value streamed takes two chunks of StreamThreshold bytes. The copy of the value in the write
// buffer (Options.WriteBufferSize) is not counted here.
func (c *Cache) PutFromMemory(size int64) int64 {
	// As putFrom decides (stream.go); a value compressed has its stored form too (compress.go).
	if c.readsWhole(size) {
		if c.compresses(size) {
			return int64(bufSize(int(size)) + bufSize(codec.MaxStored(int(size))))
		}
		return int64(bufSize(int(size)))
	}
	return 2 * int64(c.chunkSize())
}
