package blobcache

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/hugemem"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// smallRecord is the largest record read whole with one positioned read when a reader is
// opened; larger blobs are streamed from the segment as the caller reads.
const smallRecord = 1<<20 + record.HeaderSize + record.MaxKeyLen

// streamChunk is how much of a large blob's value the first read brings in with its header.
const streamChunk = 256 << 10

// Reader streams one blob. It is what Get returns as an io.Reader; it also implements
// io.WriterTo and io.Closer. Close (or reading to the end) returns its buffer and file reference;
// a Reader dropped without either is cleaned up by the garbage collector.
//
// With verification on, the Read that delivers the last byte returns an error wrapping
// ErrChecksumMismatch if the bytes do not match their stored checksums. A blob that was
// overwritten or deleted while a large Reader streamed it makes Read fail with an error rather
// than return bytes of another blob.
type Reader struct {
	c    *Cache
	h    uint64
	loc  index.Loc
	size int64 // bytes this reader delivers in all

	buf *[]byte // pooled buffer holding the record (or its start)
	val []byte  // buffered value bytes not yet delivered

	ref    *segRef // held while value bytes remain to be read from the file
	off    int64   // file offset of the next unbuffered value byte
	remain int64   // unbuffered value bytes left

	verify   bool
	crc      uint32 // running CRC-32C of the value
	wantCRC  uint32
	userHash hash.Hash32 // running custom checksum, when the record has one and it is not CRC-32C
	wantSum  uint32

	hasSum bool
	sum    uint32
	err    error
}

// segRef is a reader's reference on a segment, released once: by the reader at the end or on
// Close, or by the cleanup registered for a reader dropped early.
type segRef struct {
	s        *segHandle
	released atomic.Bool
}

func (r *segRef) release() {
	if r != nil && !r.released.Swap(true) {
		r.s.unref()
	}
}

// Size is the number of bytes the reader delivers (the blob's size for Get).
func (r *Reader) Size() int64 { return r.size }

// Checksum returns the blob's stored checksum (see Options.Checksum), if it has one.
func (r *Reader) Checksum() (uint32, bool) { return r.sum, r.hasSum }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	if len(r.val) > 0 {
		n = copy(p, r.val)
		r.val = r.val[n:]
	} else if r.remain > 0 {
		// Read straight into p; but with direct reads a small p would cost a device read each,
		// so then a chunk is read into the reader's buffer and p is served from there.
		dst := p
		if _, direct := r.ref.s.rd.(*vfs.DirectReader); direct && len(p) < streamChunk {
			if r.buf == nil || cap(*r.buf) < streamChunk {
				if r.buf != nil {
					putBuf(r.buf)
				}
				r.buf = getBuf(streamChunk)
			}
			dst = (*r.buf)[:streamChunk]
		}
		want := int(min(int64(len(dst)), r.remain))
		m, err := r.ref.s.rd.ReadAt(dst[:want], r.off)
		if err == nil && !r.c.stillAt(r.h, r.loc) {
			err = fmt.Errorf("%w: blob was replaced while being read", ErrNotFound)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: segment %d ends inside a record at offset %d", ErrCorrupt, r.loc.Segment, r.off)
			}
			r.fail(err)
			return 0, r.err
		}
		n = m
		r.off += int64(m)
		r.remain -= int64(m)
		if &dst[0] != &p[0] {
			n = copy(p, dst[:m])
			r.val = dst[n:m]
		}
	}
	if r.verify {
		r.crc = record.UpdateCRC(r.crc, p[:n])
		if r.userHash != nil {
			r.userHash.Write(p[:n])
		}
	}
	if len(r.val) == 0 && r.remain == 0 {
		r.finish()
		return n, r.err
	}
	return n, nil
}

// WriteTo implements io.WriterTo. A buffered blob is checked before any byte is written.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if r.err == nil && r.remain == 0 && len(r.val) > 0 && r.verify {
		r.crc = record.UpdateCRC(r.crc, r.val)
		if r.userHash != nil {
			r.userHash.Write(r.val)
		}
		v := r.val
		r.val = nil
		// Check first, write, and only then give the buffer back: v lives in it.
		r.check()
		if r.err != io.EOF {
			r.release()
			return 0, r.err
		}
		n, err := w.Write(v)
		r.release()
		return int64(n), err
	}
	var chunk []byte
	for {
		if len(r.val) > 0 && r.err == nil {
			v := r.val
			if r.verify {
				r.crc = record.UpdateCRC(r.crc, v)
				if r.userHash != nil {
					r.userHash.Write(v)
				}
			}
			r.val = nil
			n, err := w.Write(v)
			total += int64(n)
			if err != nil {
				r.Close()
				return total, err
			}
			if r.remain == 0 {
				r.finish()
			}
			continue
		}
		if r.err != nil {
			if r.err == io.EOF {
				return total, nil
			}
			return total, r.err
		}
		if chunk == nil {
			chunk = make([]byte, streamChunk)
		}
		n, err := r.Read(chunk)
		if n > 0 {
			m, werr := w.Write(chunk[:n])
			total += int64(m)
			if werr != nil {
				r.Close()
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// finish ends the reader after its last byte: checks checksums, releases resources.
func (r *Reader) finish() {
	r.check()
	r.release()
}

// check sets the reader's final error after its last byte: io.EOF, or a checksum mismatch.
func (r *Reader) check() {
	r.err = io.EOF
	if r.verify {
		if r.crc != r.wantCRC {
			r.err = fmt.Errorf("%w: segment %d offset %d: value crc32c %#08x, stored %#08x",
				ErrChecksumMismatch, r.loc.Segment, r.loc.Offset, r.crc, r.wantCRC)
		} else if r.userHash != nil && r.userHash.Sum32() != r.wantSum {
			r.err = fmt.Errorf("%w: segment %d offset %d: blob checksum %#08x, stored %#08x",
				ErrChecksumMismatch, r.loc.Segment, r.loc.Offset, r.userHash.Sum32(), r.wantSum)
		}
		if r.err != io.EOF {
			r.c.stats.corrupt.Add(1)
		}
	}
}

func (r *Reader) fail(err error) {
	r.err = err
	r.release()
}

func (r *Reader) release() {
	r.val = nil
	if r.buf != nil {
		putBuf(r.buf)
		r.buf = nil
	}
	r.ref.release()
}

// Close releases the reader's buffer and file reference. Reads after Close return io.EOF if
// the blob was read to the end, or ErrClosed.
func (r *Reader) Close() error {
	if r.err == nil {
		r.err = ErrClosed
	}
	r.release()
	return nil
}

// Get returns a reader of the blob stored under key, or false if the cache does not hold it.
// A miss that the bloom filter rejects costs no I/O and no allocation; a hit of a blob up to
// 1 MiB costs one positioned read. I/O errors and checksum mismatches come from Read.
func (c *Cache) Get(key []byte) (io.Reader, bool) {
	r, ok := c.get(key, 0, -1)
	if !ok {
		return nil, false
	}
	return r, true
}

// GetRange is Get for the bytes [off, off+n) of the blob (n < 0: to the end). The range is
// clamped to the blob. Verification applies only when the range is the whole blob; the header
// and key are always checked.
func (c *Cache) GetRange(key []byte, off, n int64) (*Reader, bool) {
	if off < 0 {
		return nil, false
	}
	return c.get(key, off, n)
}

func (c *Cache) get(key []byte, off, n int64) (*Reader, bool) {
	if len(key) == 0 || len(key) > MaxKeyLen || c.closed.Load() {
		return nil, false
	}
	h := record.KeyHash(key)
	st := c.stats.stripe(h)
	if !c.bloom.Load().Test(h) {
		st.bloomRejects.Add(1)
		return nil, false
	}
	if v, ok := c.w.lookup(h, key, true); ok {
		if v.Kind != record.KindPut {
			st.misses.Add(1)
			return nil, false
		}
		st.hits.Add(1)
		return c.memReader(v, off, n), true
	}
	for range 3 {
		loc, ok := c.idx.Get(h)
		if !ok {
			st.falsePositives.Add(1)
			return nil, false
		}
		r, res := c.open(h, key, loc, off, n)
		switch res {
		case openHit:
			st.hits.Add(1)
			return r, true
		case openMiss:
			st.misses.Add(1)
			return nil, false
		}
		// openRetry: the index changed under the read; look again.
	}
	st.misses.Add(1)
	return nil, false
}

func (c *Cache) memReader(v batch.Value, off, n int64) *Reader {
	off = min(off, int64(len(v.Value)))
	end := int64(len(v.Value))
	if n >= 0 {
		end = min(end, off+n)
	}
	return &Reader{c: c, val: v.Value[off:end], size: end - off, hasSum: v.Flags&record.FlagHasChecksum != 0, sum: v.Sum}
}

type openResult int

const (
	openHit openResult = iota
	openMiss
	openRetry
)

// stillAt reports whether the index still maps h to loc. A read that found its bytes and then
// sees the same location knows they were not freed (and punched out) before it read them.
func (c *Cache) stillAt(h uint64, loc index.Loc) bool {
	now, ok := c.idx.Get(h)
	return ok && now == loc
}

// open reads the record at loc and builds a reader for value bytes [off, off+n).
func (c *Cache) open(h uint64, key []byte, loc index.Loc, off, n int64) (*Reader, openResult) {
	s, recOff := c.acquireRecord(h, loc)
	if s == nil {
		return nil, openRetry
	}
	return c.openRecord(s, recOff, h, key, loc, off, n)
}

// acquireRecord returns the file holding the record at loc, with a reader reference, and the
// record's offset in it; nil if the file is gone (evicted, overwritten or deleted).
func (c *Cache) acquireRecord(h uint64, loc index.Loc) (*segHandle, int64) {
	if c.opts.PerBlobFiles {
		return c.openBlobFile(h, loc), 0
	}
	return c.segs.acquire(loc.Segment), int64(loc.Offset)
}

// openRecord is open once the file is held: s carries a reader reference that openRecord
// releases or hands to the Reader.
func (c *Cache) openRecord(s *segHandle, recOff int64, h uint64, key []byte, loc index.Loc, off, n int64) (*Reader, openResult) {
	hk := int64(record.HeaderSize + len(key))
	vlen := int64(loc.Length) - hk
	if vlen < 0 {
		s.unref()
		return nil, openMiss // a record of another, shorter key with the same hash
	}
	off = min(off, vlen)
	end := vlen
	if n >= 0 {
		end = min(vlen, off+n)
	}
	whole := off == 0 && end == vlen
	// What the first read brings in: the whole record when small, else header and key plus the
	// start of the range.
	first := int64(loc.Length)
	if first > smallRecord {
		first = hk
		if off == 0 {
			first = hk + min(end, streamChunk)
		}
	}
	// With direct reads, start b as far past an aligned address as the record is past an
	// aligned offset, so the device writes the aligned middle in place (see vfs.DirectReader).
	skew := 0
	if _, direct := s.rd.(*vfs.DirectReader); direct && first >= 2*vfs.DirectIOAlignment {
		skew = int(recOff % vfs.DirectIOAlignment)
	}
	buf := getBuf(int(first) + skew)
	b := (*buf)[skew:]
	if _, err := s.rd.ReadAt(b, recOff); err != nil {
		s.unref()
		putBuf(buf)
		if !c.stillAt(h, loc) {
			return nil, openRetry
		}
		c.stats.readErrors.Add(1)
		// An I/O error on a hit is the reader's to report.
		return &Reader{c: c, err: fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)}, openHit
	}
	if !c.stillAt(h, loc) {
		s.unref()
		putBuf(buf)
		return nil, openRetry
	}
	hdr, k, err := record.Decode(b)
	if err == nil && hdr.Kind == record.KindPut && int64(hdr.ValueLen) != vlen && string(k) == string(key) {
		err = fmt.Errorf("%w: value length %d, index says %d", record.ErrBadLength, hdr.ValueLen, vlen)
	}
	if err != nil || hdr.Kind != record.KindPut {
		s.unref()
		putBuf(buf)
		c.stats.corrupt.Add(1)
		c.noteCorruption(fmt.Errorf("%w: segment %d offset %d: %w", ErrCorrupt, loc.Segment, loc.Offset, err))
		return nil, openMiss
	}
	if string(k) != string(key) {
		s.unref()
		putBuf(buf)
		return nil, openMiss // hash collision: another key's record
	}
	if c.opts.PerBlobFiles && int64(len(b)) == int64(loc.Length) {
		// A blob file is not scanned on open, so a torn one is caught here.
		if err := record.CheckValue(hdr, b[hk:]); err != nil {
			s.unref()
			putBuf(buf)
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("%w: %s: %w", ErrCorrupt, s.f.Name(), err))
			return nil, openMiss
		}
	}
	r := &Reader{
		c: c, h: h, loc: loc, size: end - off, buf: buf,
		hasSum: hdr.Flags&record.FlagHasChecksum != 0, sum: hdr.Sum,
	}
	if (c.opts.VerifyOnRead || c.opts.PerBlobFiles) && whole {
		r.verify = true
		r.wantCRC = hdr.ValueCRC
		if r.hasSum && c.opts.ChecksumHash != nil {
			r.userHash = c.opts.ChecksumHash()
			r.wantSum = hdr.Sum
		}
	}
	bufEnd := int64(len(b)) - hk // value bytes in buf
	if off < bufEnd {
		r.val = b[hk+off : hk+min(end, bufEnd)]
	}
	if end > bufEnd {
		r.off = recOff + hk + max(off, bufEnd)
		r.remain = end - max(off, bufEnd)
		r.ref = &segRef{s: s}
		runtime.AddCleanup(r, func(ref *segRef) { ref.release() }, r.ref)
	} else {
		s.unref()
	}
	if r.size == 0 {
		r.finish()
	}
	return r, openHit
}

// NewReadBuffer returns n zeroed bytes for ReadAt to read values into. Any memory works with
// ReadAt; this memory makes direct reads (WithDirectIOReads) cheaper for the device. It starts on
// a 2 MiB boundary and is advised to the kernel as transparent huge-page memory (Linux), so a
// value that is read in place (see WithDirectIOReads) lands in physically contiguous memory and
// the device fills it with one request. On 4 KiB pages a 1 MiB value is 256 pieces of memory,
// more than one request may carry on many devices, so it takes two (docs/DESIGN.md, "Direct
// reads", has the figures).
//
// Huge pages are resident 2 MiB at a time: to give several readers buffers, cut them from one
// call at multiples of 4 KiB rather than call once per reader. The memory belongs to the garbage
// collector like any slice's.
func NewReadBuffer(n int) []byte { return hugemem.Slice[byte](n) }

// ReadAt reads the bytes [off, off+len(p)) of the blob stored under key into p, without
// allocating. It returns ErrNotFound for a missing key, and io.EOF with the bytes that exist
// when the blob ends before p is full. Checksums are verified (with VerifyOnRead) when p covers
// the whole blob.
func (c *Cache) ReadAt(key, p []byte, off int64) (int, error) {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return 0, ErrInvalidKey
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("blobcache: negative offset %d", off)
	}
	h := record.KeyHash(key)
	st := c.stats.stripe(h)
	if !c.bloom.Load().Test(h) {
		st.bloomRejects.Add(1)
		return 0, ErrNotFound
	}
	if v, n, ok := c.w.readValue(h, key, p, off); ok {
		// Still in the write buffer: copied straight into p, no allocation.
		if v.Kind != record.KindPut {
			st.misses.Add(1)
			return 0, ErrNotFound
		}
		st.hits.Add(1)
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	for range 3 {
		loc, ok := c.idx.Get(h)
		if !ok {
			st.falsePositives.Add(1)
			return 0, ErrNotFound
		}
		n, res, err := c.readAt(h, key, loc, p, off)
		switch res {
		case openHit:
			st.hits.Add(1)
			return n, err
		case openMiss:
			st.misses.Add(1)
			return 0, ErrNotFound
		}
	}
	st.misses.Add(1)
	return 0, ErrNotFound
}

// readScratch is the pooled header-and-key buffer and iovec array of ReadAt.
type readScratch struct {
	hk  [record.HeaderSize + record.MaxKeyLen]byte
	iov [2][]byte
}

var scratchPool = sync.Pool{New: func() any { return new(readScratch) }}

func (c *Cache) readAt(h uint64, key []byte, loc index.Loc, p []byte, off int64) (int, openResult, error) {
	hk := record.HeaderSize + len(key)
	vlen := int64(loc.Length) - int64(hk)
	if vlen < 0 {
		return 0, openMiss, nil
	}
	s, recOff := c.acquireRecord(h, loc)
	if s == nil {
		return 0, openRetry, nil
	}
	defer s.unref()
	sc := scratchPool.Get().(*readScratch)
	defer func() { sc.iov = [2][]byte{}; scratchPool.Put(sc) }()
	want := p
	if off >= vlen {
		want = p[:0]
	} else if int64(len(p)) > vlen-off {
		want = p[:vlen-off]
	}
	var err error
	if off == 0 {
		sc.iov[0], sc.iov[1] = sc.hk[:hk], want
		_, err = s.rd.ReadvAt(sc.iov[:], recOff)
	} else {
		if _, err = s.rd.ReadAt(sc.hk[:hk], recOff); err == nil && len(want) > 0 {
			_, err = s.rd.ReadAt(want, recOff+int64(hk)+off)
		}
	}
	if !c.stillAt(h, loc) {
		return 0, openRetry, nil
	}
	if err != nil {
		c.stats.readErrors.Add(1)
		return 0, openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)
	}
	hdr, k, derr := record.Decode(sc.hk[:hk])
	if derr == nil && hdr.Kind == record.KindPut && string(k) == string(key) && int64(hdr.ValueLen) != vlen {
		derr = record.ErrBadLength
	}
	if derr != nil || hdr.Kind != record.KindPut {
		c.stats.corrupt.Add(1)
		c.noteCorruption(fmt.Errorf("%w: segment %d offset %d: %w", ErrCorrupt, loc.Segment, loc.Offset, derr))
		return 0, openMiss, nil
	}
	if string(k) != string(key) {
		return 0, openMiss, nil
	}
	if (c.opts.VerifyOnRead || c.opts.PerBlobFiles) && off == 0 && int64(len(want)) == vlen {
		if got := record.CRC(want); got != hdr.ValueCRC {
			c.stats.corrupt.Add(1)
			return 0, openHit, fmt.Errorf("%w: segment %d offset %d: value crc32c %#08x, stored %#08x",
				ErrChecksumMismatch, loc.Segment, loc.Offset, got, hdr.ValueCRC)
		}
		if hdr.Flags&record.FlagHasChecksum != 0 && c.opts.ChecksumHash != nil {
			hh := c.opts.ChecksumHash()
			hh.Write(want)
			if got := hh.Sum32(); got != hdr.Sum {
				c.stats.corrupt.Add(1)
				return 0, openHit, fmt.Errorf("%w: segment %d offset %d: blob checksum %#08x, stored %#08x",
					ErrChecksumMismatch, loc.Segment, loc.Offset, got, hdr.Sum)
			}
		}
	}
	if len(want) < len(p) {
		return len(want), openHit, io.EOF
	}
	return len(want), openHit, nil
}

// BlobInfo describes a stored blob without its bytes.
type BlobInfo struct {
	Size        int64     // bytes of the value
	Checksum    uint32    // the blob checksum (see Options.Checksum), if HasChecksum
	HasChecksum bool      //
	Created     time.Time // when it was put
}

// Stat returns what the cache knows of the blob under key without reading its value: one
// positioned read of the record header and key (none while the blob is still in the write
// buffer). It returns ErrNotFound for a missing key.
func (c *Cache) Stat(key []byte) (BlobInfo, error) {
	if err := c.checkKey(key); err != nil {
		return BlobInfo{}, err
	}
	if c.closed.Load() {
		return BlobInfo{}, ErrClosed
	}
	h := record.KeyHash(key)
	if !c.bloom.Load().Test(h) {
		return BlobInfo{}, ErrNotFound
	}
	if v, ok := c.w.lookup(h, key, false); ok {
		if v.Kind != record.KindPut {
			return BlobInfo{}, ErrNotFound
		}
		return BlobInfo{Size: v.Length, Checksum: v.Sum, HasChecksum: v.Flags&record.FlagHasChecksum != 0, Created: time.Unix(0, v.CTime)}, nil
	}
	for range 3 {
		loc, ok := c.idx.Get(h)
		if !ok {
			return BlobInfo{}, ErrNotFound
		}
		s, recOff := c.acquireRecord(h, loc)
		if s == nil {
			continue
		}
		sc := scratchPool.Get().(*readScratch)
		hk := sc.hk[:record.HeaderSize+len(key)]
		_, err := s.rd.ReadAt(hk, recOff)
		s.unref()
		if !c.stillAt(h, loc) {
			scratchPool.Put(sc)
			continue
		}
		if err != nil {
			scratchPool.Put(sc)
			return BlobInfo{}, fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)
		}
		hdr, k, err := record.Decode(hk)
		match := err == nil && hdr.Kind == record.KindPut && string(k) == string(key) &&
			int64(hdr.ValueLen) == int64(loc.Length)-int64(len(hk))
		scratchPool.Put(sc)
		if !match {
			if err != nil {
				c.stats.corrupt.Add(1)
			}
			return BlobInfo{}, ErrNotFound
		}
		return BlobInfo{Size: int64(hdr.ValueLen), Checksum: hdr.Sum, HasChecksum: hdr.Flags&record.FlagHasChecksum != 0, Created: time.Unix(0, hdr.CTime)}, nil
	}
	return BlobInfo{}, ErrNotFound
}
