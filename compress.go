package blobcache

import (
	"errors"
	"fmt"
	"io"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/codec"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// Compression is how values are stored on the device (Options.Compression).
type Compression uint8

const (
	// CompressionNone stores values as given.
	CompressionNone Compression = Compression(codec.None)
	// CompressionZstd compresses values with zstd at its fastest level.
	CompressionZstd Compression = Compression(codec.Zstd)
	// CompressionS2 compresses values with s2: faster than zstd, and less.
	CompressionS2 Compression = Compression(codec.S2)
)

func (c Compression) String() string { return codec.Codec(c).String() }

// ParseCompression parses the name of a compression as String gives it: "none", "zstd" or "s2".
func ParseCompression(s string) (Compression, error) {
	for _, c := range []Compression{CompressionNone, CompressionZstd, CompressionS2} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("blobcache: unknown compression %q (none, zstd or s2)", s)
}

// How a compressed value moves (docs/DESIGN.md, "Compressed values"):
//
//   - Put compresses the value in the caller's goroutine, before it enters the write buffer, in
//     independent blocks behind a table (internal/codec). A value a sample of which does not
//     shrink is stored as given, and so is one that did not shrink once compressed. The record
//     says how its value is stored (record.Header.Codec) and how long it is once decompressed
//     (DataLen); its ValueCRC covers the stored bytes, its blob checksum (Sum) the value.
//   - Everything that counts bytes on disk (MaxSize, eviction, the policies, the write budget)
//     sees the record as stored; everything that reports a blob's size (Stat, BlobInfo,
//     Reader.Size, the servers) the value's.
//   - A read of a compressed record reads the table and the blocks that cover its range, checks
//     each block's CRC-32C, and decompresses into a buffer of its own; a Reader then delivers
//     from memory, so compressed values never go out by sendfile. A damaged block is a miss,
//     counted and noted, never bytes.
//   - The memory tier holds values decompressed: a hit from memory costs what an uncompressed
//     one does.

// compress returns the stored form of value, in a pooled buffer the caller puts back, when the
// cache compresses and value is worth it; ok is false otherwise (value is stored as given).
func (c *Cache) compress(value []byte) (stored []byte, buf *[]byte, ok bool) {
	if !c.compresses(int64(len(value))) {
		return nil, nil, false
	}
	buf = getBuf(codec.MaxStored(len(value)))
	stored, ok = c.comp.Compress((*buf)[:0], value)
	if !ok {
		putBuf(buf)
		c.stats.storedAsGiven.Add(1)
		return nil, nil, false
	}
	c.stats.compressedPuts.Add(1)
	c.stats.compressedIn.Add(uint64(len(value)))
	c.stats.compressedOut.Add(uint64(len(stored)))
	return stored, buf, true
}

// compresses reports whether a value of n bytes is tried for compression: the cache compresses,
// and the value is at least codec.MinValue and at most a write buffer (a larger one is written
// straight into its segment as given). So a compressed value is never larger than a write buffer,
// which bounds what a read of one decompresses into.
func (c *Cache) compresses(n int64) bool {
	return c.comp != nil && n >= codec.MinValue && n <= c.opts.WriteBufferSize
}

// compressInto makes hdr (of a put of value, its sums sealed) describe value's stored form
// stored: the codec, the value's length, and the stored bytes' length and CRC-32C.
func (c *Cache) compressInto(hdr *record.Header, value, stored []byte) {
	hdr.Codec, hdr.DataLen = uint8(c.comp.Codec()), uint32(len(value))
	hdr.ValueLen, hdr.ValueCRC = uint32(len(stored)), record.CRC(stored)
}

// decodePending decompresses the value of a record still in the write buffer, which v holds as
// stored: v is returned as if the value had been stored as given.
func decodePending(v batch.Value) (batch.Value, error) {
	out := make([]byte, v.DataLen)
	if err := codec.DecodeAll(codec.Codec(v.Codec), out, v.Value); err != nil {
		return batch.Value{}, fmt.Errorf("blobcache: the write buffer's compressed value: %w", err)
	}
	v.Value, v.Length, v.Codec, v.DataLen = out, int64(len(out)), 0, 0
	return v, nil
}

// plainHeader is hdr as if its value were stored as given: what the memory tier keeps with a
// decompressed value.
func plainHeader(hdr record.Header) record.Header {
	if hdr.Codec != 0 {
		hdr.ValueLen, hdr.Codec, hdr.DataLen = hdr.DataLen, 0, 0
	}
	return hdr
}

// decodeRange fills dst with value bytes [off, off+len(dst)) of the compressed record whose
// header is hdr and whose stored value starts at file offset valOff of f. have is a prefix of
// the stored value already read (may be empty): what it holds is not read again. Each block is
// checked against its CRC-32C before it is decompressed; damage is an error wrapping
// ErrCorrupt.
func (c *Cache) decodeRange(f blobFile, valOff int64, hdr record.Header, have, dst []byte, off int64) error {
	stored := int64(hdr.ValueLen)
	have = have[:min(int64(len(have)), stored)]
	tl := codec.TableLen(int64(hdr.DataLen))
	if tl > stored {
		return fmt.Errorf("%w: a compressed value of %d bytes stored in %d, less than its table", ErrCorrupt, hdr.DataLen, stored)
	}
	table := have
	if int64(len(have)) < tl {
		buf := getBuf(int(tl))
		defer putBuf(buf)
		table = *buf
		if _, err := f.ReadAt(table, valOff); err != nil {
			return fmt.Errorf("blobcache: read a compressed value's table: %w", err)
		}
	}
	t, err := codec.ParseTable(table, stored, int64(hdr.DataLen))
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	first, last := t.Cover(off, off+int64(len(dst)))
	s, e := t.Span(first, last)
	span := have[min(s, int64(len(have))):min(e, int64(len(have)))]
	if int64(len(have)) < e {
		buf := getBuf(int(e - s))
		defer putBuf(buf)
		span = *buf
		if _, err := f.ReadAt(span, valOff+s); err != nil {
			return fmt.Errorf("blobcache: read a compressed value's blocks: %w", err)
		}
	}
	return t.Decode(codec.Codec(hdr.Codec), dst, off, span, first, last)
}

// openCompressed is openRecord's end for a compressed record (header hdr, attributes attrs):
// a Reader of value bytes [off, off+n) (n < 0: to the end) decompressed into a buffer of its
// own, from have (the stored value's bytes the first read brought in) and what else of the
// stored value the range needs, read through rd. A whole value read on its second hit enters
// the memory tier decompressed (admit). Damage is a miss, counted and noted.
func (c *Cache) openCompressed(dst *Reader, l *keyLookup, rd blobFile, hdr record.Header, attrs string, have []byte, off, n int64, admit bool) (*Reader, openResult) {
	vlen := int64(hdr.DataLen)
	off = min(off, vlen)
	end := vlen
	if n >= 0 {
		end = min(vlen, off+n)
	}
	out := getBuf(int(end - off))
	err := c.decodeRange(rd, l.recOff+hdr.ValueOffset(), hdr, have, *out, off)
	if !l.stillAt() {
		putBuf(out)
		return nil, openRetry
	}
	if err != nil {
		putBuf(out)
		if errors.Is(err, ErrCorrupt) {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err))
			return nil, openMiss
		}
		c.stats.readErrors.Add(1)
		return c.errReader(dst, fmt.Errorf("blobcache: read segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err)), openHit
	}
	if admit && off == 0 && end == vlen {
		// Checked block by block as it was decompressed.
		l.admitToMemory(plainHeader(hdr), attrs, *out, true)
	}
	// The file is not needed past here: openRecord releases it, and the Reader keeps out alone.
	r := c.newReader(dst)
	r.h, r.loc, r.size, r.hdr, r.attrs, r.val, r.buf = l.h, l.loc, end-off, hdr, attrs, *out, out
	if r.size == 0 {
		r.finish()
	}
	return r, openHit
}

// readAtCompressed is readAt's end for a compressed record (header hdr): value bytes [off,
// off+len(p)) decompressed into p. have is the start of the stored value, read into p already
// (moved out of the way first). A whole value without attributes enters the memory tier on its
// second hit, as in readAt. Damage is a miss, counted and noted.
func (c *Cache) readAtCompressed(l *keyLookup, hdr record.Header, p []byte, off int64, have []byte) (int, openResult, error) {
	var hb *[]byte
	if len(have) > 0 {
		hb = getBuf(len(have))
		copy(*hb, have)
		have = *hb
		defer putBuf(hb)
	}
	want := clampTo(p, off, int64(hdr.DataLen))
	err := c.decodeRange(l.file.rd, l.recOff+hdr.ValueOffset(), hdr, have, want, off)
	if !l.stillAt() {
		return 0, openRetry, nil
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err))
			return 0, openMiss, nil
		}
		c.stats.readErrors.Add(1)
		return 0, openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err)
	}
	if off == 0 && int64(len(want)) == int64(hdr.DataLen) && hdr.AttrLen == 0 && l.admitsToMemory(int64(l.loc.Length)) {
		l.admitToMemory(plainHeader(hdr), "", want, true)
	}
	if len(want) < len(p) {
		return len(want), openHit, io.EOF
	}
	return len(want), openHit, nil
}
