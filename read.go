package blobcache

import (
	"fmt"
	"io"
	"sync"
	"time"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/bufmem"
	"github.com/seed57392e9e/blobcache/internal/hugemem"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// smallRecord is the largest record read whole with one positioned read when a reader is
// opened; larger blobs are streamed from the segment as the caller reads.
const smallRecord = 1<<20 + record.HeaderSize + record.MaxKeyLen

// Get returns a reader of the blob stored under key, or false if the cache does not hold it.
// A miss that the bloom filter rejects costs no I/O and no allocation; a hit of a blob up to
// 1 MiB costs one positioned read. I/O errors and checksum mismatches come from Read. Close the
// reader (or read it to the end) to hand back its buffer and file at once.
func (c *Cache) Get(key []byte) (*Reader, bool) { return c.get(nil, key, 0, -1, false, 0) }

// Open is Get for a caller that hands the blob to a socket with the Reader's WriteTo (io.Copy
// to a net.Conn does that). Its first read brings in the record's header and key, and the whole
// value only if it is at most OpenHead bytes; the rest stays in the segment, and WriteTo has
// the kernel copy it from the page cache to the socket (sendfile(2) on Linux) without a copy
// through user space, when no check needs its bytes (Options.VerifyOnRead off) and the hit is
// read through the page cache (see docs/DESIGN.md, "Which hits go to the device"). Otherwise
// (a check is due, or the hit goes to the device) its first read is Get's; a caller that calls
// Read on a Reader that left the value in the file makes one more positioned read than Get.
func (c *Cache) Open(key []byte) (*Reader, bool) { return c.get(nil, key, 0, -1, true, 0) }

// OpenEncoded is Open for a caller that can take a value compressed with accept as it is stored
// (an HTTP client that accepts Content-Encoding zstd, for CompressionZstd): a value stored so is
// delivered as stored, with no decompression, and Reader.Encoding says so (Reader.Size is then
// the stored size; Reader.Info's Size is still the value's). Any other value is delivered as
// Open delivers it. The stored bytes are checked against their CRC-32C as Open's are (see
// Reader.Verifies): the blocks' own checks are the client's to make.
func (c *Cache) OpenEncoded(key []byte, accept Compression) (*Reader, bool) {
	return c.get(nil, key, 0, -1, true, uint8(accept))
}

// GetInto is Get into a Reader the caller owns and reuses from read to read, for a caller that
// serves many reads and would allocate none: r is closed first (what it still holds is
// released, as by Close), then made a reader of the blob, as Get's; on a miss it stays closed.
// A Reader used so holds the memory tier's entry its bytes lie in whatever their size (Get
// copies a value of up to OpenHead bytes out of it), so close it, or reuse it, once done with
// the bytes. The zero Reader is ready for use; the first GetInto of a Reader allocates what it
// keeps for all the reads after it. A Reader from Get, Open or GetRange can be reused as well.
func (c *Cache) GetInto(r *Reader, key []byte) bool {
	return c.into(r, key, 0, -1, false, 0)
}

// OpenInto is Open into a Reader the caller owns (see GetInto).
func (c *Cache) OpenInto(r *Reader, key []byte) bool { return c.into(r, key, 0, -1, true, 0) }

// OpenEncodedInto is OpenEncoded into a Reader the caller owns (see GetInto).
func (c *Cache) OpenEncodedInto(r *Reader, key []byte, accept Compression) bool {
	return c.into(r, key, 0, -1, true, uint8(accept))
}

// GetRangeInto is GetRange into a Reader the caller owns (see GetInto).
func (c *Cache) GetRangeInto(r *Reader, key []byte, off, n int64) bool {
	if off < 0 {
		c.newReader(r).err = ErrClosed
		return false
	}
	return c.into(r, key, off, n, false, 0)
}

func (c *Cache) into(r *Reader, key []byte, off, n int64, lazy bool, accept uint8) bool {
	if _, ok := c.get(r, key, off, n, lazy, accept); ok {
		return true
	}
	c.newReader(r).err = ErrClosed
	return false
}

// OpenHead is the largest value Open reads with the record's header: smaller values cost a
// socket write from memory about what sending them from the file would.
const OpenHead = 16 << 10

// checksWholeReads reports whether a read that brings in a whole value checks it against its
// record's CRC-32C: with VerifyOnRead, or where the layout's files are not scanned on open.
func (c *Cache) checksWholeReads() bool { return c.opts.VerifyOnRead || c.layout.checksValues() }

// GetRange is Get for the bytes [off, off+n) of the blob (n < 0: to the end). The range is
// clamped to the blob. Verification applies only when the range is the whole blob; the header
// and key are always checked.
func (c *Cache) GetRange(key []byte, off, n int64) (*Reader, bool) {
	if off < 0 {
		return nil, false
	}
	return c.get(nil, key, off, n, false, 0)
}

// OpenResidentInto is OpenInto for a caller that must not wait for the device, such as a
// server's event loop. When key's newest record lies in a segment file and the memory tier does
// not hold it, it reads nothing, counts nothing (no hit, no miss, no access), closes r as a miss
// does, and returns resident false: the caller then asks again with OpenInto where a read may
// wait. Otherwise resident is true and found is what OpenInto would have returned. It costs one
// lookup where Resident followed by OpenInto costs two.
func (c *Cache) OpenResidentInto(r *Reader, key []byte) (found, resident bool) {
	l := keyLookup{residentOnly: true}
	if _, found = c.lookupRead(&l, r, key, 0, -1, true, 0); !found {
		c.newReader(r).err = ErrClosed
	}
	return found, !l.wouldOpen
}

// get is Get, GetRange, Open and OpenEncoded, and with dst their Into forms: a reader of value
// bytes [off, off+n) (n < 0: to the end), dst itself when not nil (see newReader); with lazy,
// Open's; accept, if not 0, the codec whose stored bytes the caller takes as they are. On a miss
// dst is left as it was.
func (c *Cache) get(dst *Reader, key []byte, off, n int64, lazy bool, accept uint8) (*Reader, bool) {
	var l keyLookup
	return c.lookupRead(&l, dst, key, off, n, lazy, accept)
}

// lookupRead is get, with l the lookup to run (zero, or with residentOnly set: see
// OpenResidentInto).
func (c *Cache) lookupRead(l *keyLookup, dst *Reader, key []byte, off, n int64, lazy bool, accept uint8) (*Reader, bool) {
	if len(key) == 0 || len(key) > MaxKeyLen || c.closed.Load() {
		return nil, false
	}
	h := record.KeyHash(key)
	st := c.stats.stripe(h)
	if !c.bloom.Load().Test(bloomHash(h)) {
		st.bloomRejects.Add(1)
		return nil, false
	}
	l.start(c, key, h, st)
	l.memOK, l.accept = true, accept
	if v, buf, ok, err := l.bufferedWhole(); ok {
		switch {
		case err != nil: // buf is nil: a value that failed to decompress
			l.hit()
			return c.errReader(dst, err), true
		case v.Kind != record.KindPut || !l.live(v.Version, v.CTime, v.Expires):
			if buf != nil {
				putBuf(buf)
			}
			l.miss()
			return nil, false
		}
		l.hit()
		return c.memReader(dst, v, buf, off, n), true
	}
	for l.next() {
		if e := l.mem; e != nil {
			if !l.live(e.Hdr.Version, e.Hdr.CTime, e.Hdr.Expires) {
				c.mem.Release(e)
				l.miss()
				return nil, false
			}
			l.hit()
			l.touched()
			return c.memoryReader(dst, e, off, n), true
		}
		r, res := c.openRecord(dst, l, off, n, lazy)
		switch res {
		case openHit:
			l.hit()
			if r.err == nil {
				l.touched()
			}
			return r, true
		case openMiss:
			l.miss()
			return nil, false
		}
		// openRetry: the index changed under the read; look again.
	}
	return nil, false
}

// Resident reports whether a Get of key would be answered without reading a file: the key is
// absent (the bloom filter or the index says so), its newest record is in the write buffer, or
// the memory tier holds that record. It counts nothing and reads nothing. The answer may be out
// of date as soon as it is returned (a write or an eviction meanwhile), so it is a hint of where
// to run a read (a server's event loop, or a goroutine that may wait for the device), never a
// promise about the read.
func (c *Cache) Resident(key []byte) bool {
	if len(key) == 0 || len(key) > MaxKeyLen || c.closed.Load() {
		return true
	}
	h := record.KeyHash(key)
	if !c.bloom.Load().Test(bloomHash(h)) {
		return true
	}
	if _, ok := c.unflushed.lookup(h, key); ok {
		return true
	}
	loc, _, ok := c.idx.Lookup(h)
	if !ok {
		return true
	}
	return c.mem != nil && c.mem.Holds(h, memTag(loc), key)
}

// MayContain sets out[i] to whether the cache may hold a blob under keys[i]: false is certain
// (the bloom filter rejects the key, and no I/O was needed), true needs a lookup (a Get). The
// keys are hashed and probed a batch at a time so that the filter's memory loads overlap (see
// GetMany); the rejections are counted as misses once per batch. out must be at least as long
// as keys.
func (c *Cache) MayContain(keys [][]byte, out []bool) {
	var hs [getManyBatch]uint64
	for base := 0; base < len(keys); base += getManyBatch {
		batch := keys[base:min(base+getManyBatch, len(keys))]
		for i, k := range batch {
			hs[i] = bloomHash(record.KeyHash(k))
		}
		may := out[base : base+len(batch)]
		c.bloom.Load().TestMany(hs[:len(batch)], may)
		rejected := 0
		for i, k := range batch {
			if len(k) == 0 || len(k) > MaxKeyLen {
				may[i] = false
			}
			if !may[i] {
				rejected++
			}
		}
		c.stats.stripe(hs[0]).bloomRejects.Add(uint64(rejected))
	}
}

// getManyBatch is how many keys GetMany hashes and probes the filter for at a time.
const getManyBatch = 64

// GetMany looks up many keys at once: it calls fn, in key order, with the index and a reader of
// each key the cache holds, and closes the reader when fn returns (fn must not keep it). It
// hashes a batch of keys and probes the bloom filter for all of them before it looks any up, so
// the filter's memory loads overlap and a miss the filter answers costs a fraction of a Get's;
// the misses are counted once per batch. An error of fn stops GetMany and is returned. Keys that
// are not valid keys are misses.
func (c *Cache) GetMany(keys [][]byte, fn func(i int, r *Reader) error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	var may [getManyBatch]bool
	for base := 0; base < len(keys); base += getManyBatch {
		batch := keys[base:min(base+getManyBatch, len(keys))]
		c.MayContain(batch, may[:])
		for i, k := range batch {
			if !may[i] {
				continue
			}
			r, ok := c.get(nil, k, 0, -1, false, 0)
			if !ok {
				continue
			}
			err := fn(base+i, r)
			r.Close()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

type openResult int

const (
	openHit openResult = iota
	openMiss
	openRetry
)

// readHold is what one read of a record holds: the reader reference on the file the lookup
// found, and the pooled buffer the record is read into. Each has one owner at a time: the read
// that made the hold releases it once, by a deferred release, and a Reader that takes over a part
// (Reader.keep) empties that part in the hold, so release leaves it to the Reader.
type readHold struct {
	file *segHandle
	buf  *[]byte
}

// release drops the file reference and hands the buffer back to its pool.
func (h *readHold) release() {
	if h.file != nil {
		h.file.unref()
		h.file = nil
	}
	if h.buf != nil {
		putBuf(h.buf)
		h.buf = nil
	}
}

// openRecord reads the record l found and builds a reader for value bytes [off, off+n). The
// file l holds is released, or handed to the Reader when it streams the rest of the value. lazy
// is Open's first read.
func (c *Cache) openRecord(dst *Reader, l *keyLookup, off, n int64, lazy bool) (*Reader, openResult) {
	recOff, loc := l.recOff, l.loc
	reqOff, reqN := off, n // the range asked for, before the value's stored length clamps it
	hold := readHold{file: l.file}
	defer hold.release()
	// What the first read brings in: the whole record when small, else header and key plus the
	// start of the value when the range starts at 0 (as if the header were of the current
	// format: a legacy one is shorter, and the value starts a little earlier); for Open, header
	// and key alone unless the value is small.
	first := int64(loc.Length)
	allAsked := off == 0 && n < 0 // the whole value asked for
	// A whole record read on its second hit enters the memory tier (memory.go).
	admit := allAsked && l.admitsToMemory(first)
	// The route is chosen for the bytes this reader will read, not only the first read's.
	rd := c.hitFile(l, recOff, rangeEnd(l, off, n)-recOff)
	_, direct := rd.(*vfs.DirectReader)
	if lazy && (direct || allAsked && c.checksWholeReads()) {
		// Open leaves the value in the file for WriteTo to send from there, which it does only
		// for bytes read through the page cache that no check needs to see: otherwise its
		// first read is Get's, and spares a second one (a second device request, when direct).
		lazy = false
	}
	switch {
	case admit:
		// Read whole: it enters the tier.
	case lazy && first > l.prefixLen()+OpenHead:
		first = l.prefixLen()
	case first > smallRecord:
		first = l.prefixLen()
		if off == 0 {
			want := int64(loc.Length) - first
			if n >= 0 {
				want = min(want, n)
			}
			first += min(want, streamChunk)
		}
	}
	// With direct reads, start b as far past an aligned address as the record is past an
	// aligned offset, so the device writes the aligned middle in place (see vfs.DirectReader).
	skew := 0
	if direct && first >= 2*vfs.DirectIOAlignment {
		skew = int(recOff % vfs.DirectIOAlignment)
	}
	hold.buf = getBuf(int(first) + skew)
	b := (*hold.buf)[skew:]
	if _, err := rd.ReadAt(b, recOff); err != nil {
		if !l.stillAt() {
			return nil, openRetry
		}
		c.stats.readErrors.Add(1)
		// An I/O error on a hit is the reader's to report.
		return c.errReader(dst, fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)), openHit
	}
	if !l.stillAt() {
		return nil, openRetry
	}
	hdr, ok := l.checkHeader(b[:l.prefixLen()])
	if ok && !l.live(hdr.Version, hdr.CTime, hdr.Expires) {
		return nil, openMiss
	}
	hk := hdr.ValueOffset()
	vlen := int64(hdr.ValueLen)
	off = min(off, vlen)
	end := vlen
	if n >= 0 {
		end = min(vlen, off+n)
	}
	whole := off == 0 && end == vlen
	if ok && c.layout.checksValues() && int64(len(b)) == int64(loc.Length) {
		// A blob file is not scanned on open, so a torn one is caught here.
		if err := record.CheckValue(hdr, b[hk:]); err != nil {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("%w: %s: %w", ErrCorrupt, hold.file.f.Name(), err))
			ok = false
		}
	}
	if !ok {
		return nil, openMiss
	}
	attrs, res, err := l.readAttrs(hdr, b)
	if res != openHit || err != nil {
		if err != nil {
			return c.errReader(dst, err), openHit
		}
		return nil, res
	}
	if hdr.Codec != 0 && hdr.Codec != l.accept {
		return c.openCompressed(dst, l, rd, hdr, attrs, b[hk:], reqOff, reqN, admit)
	}
	// From here the value's bytes are delivered as stored; compressed ones (OpenEncoded) never
	// enter the memory tier, which holds values.
	admit = admit && hdr.Codec == 0
	// A value that enters the memory tier is checked as it enters (a blob file's was above),
	// and the Reader, which delivers those bytes, need not check them again.
	admitted := admit && whole && int64(len(b)) == int64(loc.Length)
	if admitted && !l.admitToMemory(hdr, attrs, b[hk:hk+vlen], c.layout.checksValues() && !c.opts.VerifyOnRead) {
		return nil, openMiss
	}
	r := c.newReader(dst)
	r.h, r.loc, r.size, r.hdr, r.attrs, r.rd, r.stored = l.h, loc, end-off, hdr, attrs, rd, hdr.Codec != 0
	if c.checksWholeReads() && whole && !admitted {
		r.verify = true
		r.sums = c.readCheck(hdr)
	}
	bufEnd := int64(len(b)) - hk // value bytes in buf
	if off < bufEnd {
		r.val = b[hk+off : hk+min(end, bufEnd)]
	}
	if end > bufEnd {
		r.off = recOff + hk + max(off, bufEnd)
		r.remain = end - max(off, bufEnd)
	}
	r.keep(&hold)
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
	if !c.bloom.Load().Test(bloomHash(h)) {
		st.bloomRejects.Add(1)
		return 0, ErrNotFound
	}
	var l keyLookup
	l.start(c, key, h, st)
	if v, n, ok, err := l.bufferedValue(p, off); ok {
		// Still in the write buffer: copied straight into p, no allocation (but for a
		// compressed value).
		if err != nil {
			return 0, err
		}
		if v.Kind != record.KindPut || !l.live(v.Version, v.CTime, v.Expires) {
			l.miss()
			return 0, ErrNotFound
		}
		l.hit()
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	for l.locate() {
		// The memory tier first, its bytes copied under its lock (no hold on the entry); then
		// the file, whose read may bring the value into the tier.
		if c.mem != nil {
			if n, err, done := l.readAtMemory(p, off); done {
				return n, err
			}
		}
		if !l.acquire() {
			continue // gone since the index said so: look again
		}
		n, res, err := c.readAt(&l, p, off)
		switch res {
		case openHit:
			l.hit()
			if err == nil || err == io.EOF {
				l.touched()
			}
			return n, err
		case openMiss:
			l.miss()
			return 0, ErrNotFound
		}
	}
	return 0, ErrNotFound
}

// readScratch is the pooled header-and-key buffer and iovec array of ReadAt and Stat.
type readScratch struct {
	hk  [record.HeaderSize + record.MaxKeyLen]byte
	iov [2][]byte
}

var scratchPool = sync.Pool{New: func() any {
	sc := new(readScratch)
	bufmem.Track(sc, int(unsafe.Sizeof(*sc)))
	return sc
}}

// readAt reads the value bytes [off, off+len(p)) of the record l found into p, with its header
// and key in the same read when off is 0. It releases the file l holds.
func (c *Cache) readAt(l *keyLookup, p []byte, off int64) (int, openResult, error) {
	s, recOff, loc := l.file, l.recOff, l.loc
	defer s.unref()
	sc := scratchPool.Get().(*readScratch)
	defer func() { sc.iov = [2][]byte{}; scratchPool.Put(sc) }()
	// The read is planned for a header of the current format and a value that runs to the end
	// of the record; a legacy record's value starts a little earlier and is read again below,
	// and a record's attributes, after its value, are cut off.
	hk := l.prefixLen()
	want := clampTo(p, off, int64(loc.Length)-hk)
	var err error
	if off == 0 {
		rd := c.hitFile(l, recOff, hk+int64(len(want)))
		sc.iov[0], sc.iov[1] = sc.hk[:hk], want
		_, err = rd.ReadvAt(sc.iov[:], recOff)
	} else {
		if _, err = s.rd.ReadAt(sc.hk[:hk], recOff); err == nil && len(want) > 0 {
			_, err = c.hitFile(l, recOff+hk+off, int64(len(want))).ReadAt(want, recOff+hk+off)
		}
	}
	if !l.stillAt() {
		return 0, openRetry, nil
	}
	if err != nil {
		c.stats.readErrors.Add(1)
		return 0, openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)
	}
	hdr, ok := l.checkHeader(sc.hk[:hk])
	if !ok || !l.live(hdr.Version, hdr.CTime, hdr.Expires) {
		return 0, openMiss, nil
	}
	if hdr.Codec != 0 {
		// p holds stored bytes: the start of the stored value when off is 0.
		var have []byte
		if off == 0 {
			have = want
		}
		return c.readAtCompressed(l, hdr, p, off, have)
	}
	// The value's true length: attributes after it were read into p as scratch.
	want = clampTo(p, off, int64(hdr.ValueLen))
	if hdr.Legacy && len(want) > 0 {
		if _, err := s.rd.ReadAt(want, recOff+hdr.ValueOffset()+off); err != nil {
			c.stats.readErrors.Add(1)
			return 0, openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", loc.Segment, loc.Offset, err)
		}
		if !l.stillAt() {
			return 0, openRetry, nil
		}
	}
	vlen := int64(hdr.ValueLen)
	if c.checksWholeReads() && off == 0 && int64(len(want)) == vlen {
		vc := c.readCheck(hdr)
		vc.write(want)
		if err := vc.verify(hdr, loc); err != nil {
			c.stats.corrupt.Add(1)
			return 0, openHit, err
		}
	}
	// The whole value of a record without attributes (ReadAt reads none) enters the memory
	// tier on its second hit (memory.go), checked just above or as it enters.
	if off == 0 && int64(len(want)) == vlen && hdr.AttrLen == 0 && !hdr.Legacy && l.admitsToMemory(int64(loc.Length)) &&
		!l.admitToMemory(hdr, "", want, c.checksWholeReads()) {
		return 0, openMiss, nil
	}
	if len(want) < len(p) {
		return len(want), openHit, io.EOF
	}
	return len(want), openHit, nil
}

// clampTo returns the part of p that value bytes [off, off+len(p)) of a value of vlen bytes
// fill.
func clampTo(p []byte, off, vlen int64) []byte {
	switch {
	case off >= vlen:
		return p[:0]
	case int64(len(p)) > vlen-off:
		return p[:vlen-off]
	}
	return p
}

// BlobInfo describes a stored blob without its bytes.
type BlobInfo struct {
	Size        int64     // bytes of the value
	Checksum    uint32    // the blob checksum (see Options.Checksum), if HasChecksum
	HasChecksum bool      //
	Created     time.Time // when it was put
	// Version identifies this write of the blob: unique among the writes of the cache's
	// directory, kept across reopens (what a memcached cas or an HTTP ETag is made of).
	Version uint64
	Expires time.Time // when it becomes a miss; zero: never (see PutOptions)
	Flags   uint32    // the caller's flags, as given to PutWith
	Attrs   string    // the caller's attributes, as given to PutWith
	// Legacy says the blob was written before records carried metadata (a directory of
	// format version 1): no expiry, flags 0, and a version derived from its creation time.
	Legacy bool
}

// infoOf is the BlobInfo of a record with header h and attributes attrs.
func infoOf(h record.Header, attrs string) BlobInfo {
	info := BlobInfo{
		Size: h.BlobLen(), Checksum: h.Sum, HasChecksum: h.Flags&record.FlagHasChecksum != 0,
		Created: time.Unix(0, h.CTime), Version: h.Version, Flags: h.ClientFlags, Legacy: h.Legacy,
		Attrs: attrs,
	}
	if h.Version == 0 {
		info.Version = legacyVersion(h.CTime)
	}
	if h.Expires != 0 {
		info.Expires = time.Unix(0, h.Expires)
	}
	return info
}

// pendingHeader is the header of a record still in the write buffer, as far as a reader needs
// it.
func pendingHeader(v batch.Value) record.Header {
	return record.Header{Kind: v.Kind, Flags: v.Flags, ValueLen: uint32(v.Length), Codec: v.Codec, DataLen: v.DataLen, Sum: v.Sum, CTime: v.CTime,
		Version: v.Version, Expires: v.Expires, ClientFlags: v.ClientFlags}
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
	if !c.bloom.Load().Test(bloomHash(h)) {
		return BlobInfo{}, ErrNotFound
	}
	var l keyLookup
	l.start(c, key, h, nil)
	l.memOK = true
	if v, ok := l.buffered(); ok {
		if v.Kind != record.KindPut || !l.live(v.Version, v.CTime, v.Expires) {
			return BlobInfo{}, ErrNotFound
		}
		return infoOf(pendingHeader(v), string(v.Attrs)), nil
	}
	for l.next() {
		if e := l.mem; e != nil {
			info, fresh := infoOf(e.Hdr, e.Attrs), l.live(e.Hdr.Version, e.Hdr.CTime, e.Hdr.Expires)
			c.mem.Release(e)
			if !fresh {
				return BlobInfo{}, ErrNotFound
			}
			return info, nil
		}
		hdr, attrs, res, err := c.stat(&l)
		switch res {
		case openHit:
			if err != nil {
				return BlobInfo{}, err
			}
			if !l.live(hdr.Version, hdr.CTime, hdr.Expires) {
				return BlobInfo{}, ErrNotFound
			}
			return infoOf(hdr, attrs), nil
		case openMiss:
			return BlobInfo{}, ErrNotFound
		}
	}
	return BlobInfo{}, ErrNotFound
}

// stat reads the header and key of the record l found, and its attributes if it has any, and
// checks them. It releases the file l holds.
func (c *Cache) stat(l *keyLookup) (record.Header, string, openResult, error) {
	sc := scratchPool.Get().(*readScratch)
	defer scratchPool.Put(sc)
	hk := sc.hk[:l.prefixLen()]
	_, err := l.file.rd.ReadAt(hk, l.recOff)
	defer l.file.unref()
	if !l.stillAt() {
		return record.Header{}, "", openRetry, nil
	}
	if err != nil {
		c.stats.readErrors.Add(1)
		return record.Header{}, "", openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err)
	}
	hdr, ok := l.checkHeader(hk)
	if !ok {
		return record.Header{}, "", openMiss, nil
	}
	attrs, res, err := l.readAttrs(hdr, nil)
	return hdr, attrs, res, err
}
