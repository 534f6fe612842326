package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Streaming puts. PutFrom writes a large value from a reader straight into the active segment,
// a chunk at a time, so the value is never whole in memory: not in the caller, not in a write
// buffer. It goes in three steps:
//
//  1. Reserve (under writer.mu): the record's range is placed at the end of the active segment,
//     like a batch, and a pad record covering the whole range is written at its start. A scan
//     of the segment after a crash steps over the pad, so the records placed after it stay
//     reachable whatever becomes of the stream.
//  2. Fill (no lock held): the key and value are written a chunk at a time behind the pad's
//     header; the first chunk, which holds the header, is written last, once the value's CRC is
//     known, and turns the pad into the record. A crash before that leaves the pad.
//  3. Publish: if an older record of the key was in an unflushed batch at the reservation, a
//     job carrying the record's footer entry is committed after every batch cut before it,
//     which puts it in the index, and PutFrom waits for it. Otherwise nothing older can reach
//     the index later, so the record goes into the index at once and only its footer entry
//     waits for the pipeline: PutFrom does not wait behind unrelated batches.
//
// Ordering. Offsets still follow placement order, which is what recovery replays. In memory, a
// Put or Delete of the same key placed after the reservation is newer than the stream: it marks
// the stream superseded, and a superseded stream is not published (its record, older on disk
// too, is garbage). An ordered stream enters the index only after every batch cut before it has
// committed, and an unordered one had no older record of its key in flight, so nothing older can
// overwrite it in the index either. Footer entries are sorted by offset when the segment is
// sealed, since a publish commits after batches placed behind it.
//
// Sealing. A segment with a stream still filling cannot be sealed (its footer would miss the
// record), so segmentLayout.sealActive defers the seal, and the last stream of the segment queues it when it
// ends. A slow writer therefore holds back only the seal of its segment, and with it the
// eviction of the segments after it, never other writes.

const (
	// putChunk is how much of a streamed record is held in memory at once (two chunks per
	// stream: the first, kept until the end, and the current one).
	putChunk = 256 << 10

	// StreamThreshold is the value size above which PutFrom streams. Smaller values are read
	// into a pooled buffer and go through the write buffer like Put.
	StreamThreshold = putChunk
)

// chunkPool holds PutFrom's chunks of the default size; a cache with another size (tests)
// allocates its own.
var chunkPool = sync.Pool{New: func() any { b := vfs.AlignedBuffer(putChunk); return &b }}

// chunkSize is PutFrom's chunk and streaming threshold for c.
func (c *Cache) chunkSize() int {
	if c.opts.putChunk > 0 {
		return c.opts.putChunk
	}
	return putChunk
}

func (c *Cache) getChunk() *[]byte {
	if n := c.chunkSize(); n != putChunk {
		b := vfs.AlignedBuffer(n)
		return &b
	}
	return chunkPool.Get().(*[]byte)
}

func (c *Cache) putChunk(b *[]byte) {
	if len(*b) == putChunk {
		chunkPool.Put(b)
	}
}

// stream is a PutFrom between its reservation and its publication. Fields are guarded by
// writer.mu.
type stream struct {
	key        []byte
	seg        *segHandle
	base       int64 // offset of the range in seg
	lead       int64 // bytes of pad before the record (DirectIO: puts the value on a 4 KiB boundary)
	length     int64 // reserved bytes: the lead, the record and, with DirectIO, its pad
	superseded bool
	// ordered says an older record of the key was in an unflushed batch at the reservation:
	// the stream then goes into the index only after that batch commits, through the
	// pipeline. Otherwise endStream puts it in the index at once.
	ordered bool
	// obs is what a conditional write saw of the key: the record is published only if the
	// key's newest record is still that one.
	obs *observation
	// evicting says the segment became the oldest and a rotation has waited streamGrace to
	// evict it: the stream stops writing at its next chunk and releases the segment
	// (ErrOutrun). Read by the filling goroutine without mu.
	evicting atomic.Bool
	// intent is the position of the stream's intent in the intent log (intents.go), pending
	// until the stream ends.
	intent    uint64
	hasIntent bool
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Hold is r's Hold, counted; ok is false when r is not a ValueHolder.
func (c *countingReader) Hold(n int) ([]byte, bool, error) {
	h, ok := c.r.(ValueHolder)
	if !ok {
		return nil, false, nil
	}
	b, ok, err := h.Hold(n)
	if ok {
		c.n += int64(len(b))
	}
	return b, ok, err
}

// ValueHolder is a reader of a value that may hold the value's bytes in memory already: a
// server's read buffer that a whole request is in, say. PutFrom and its variants, where they
// read a value whole before they store it, take it from Hold rather than copying it out with Read.
type ValueHolder interface {
	io.Reader
	// Hold returns the reader's next n bytes and consumes them, if it holds all n; the bytes
	// stay valid until the PutFrom that asked returns. ok is false, and nothing consumed, if it
	// does not hold them: PutFrom then reads them. An error is the reader's, as Read's would be.
	Hold(n int) (b []byte, ok bool, err error)
}

// maxStreamLag is how many jobs a PutFrom may leave in the pipeline ahead of the commit
// goroutine when it returns without waiting for its own publication. It bounds the pipeline's
// queues when one goroutine streams values back to back (see jobQueue).
const maxStreamLag = 64

// PutFrom stores under key the next size bytes read from r. Values up to StreamThreshold are
// read into a buffer and written like Put; larger ones are written to disk as they are read, at
// most two chunks of 256 KiB in memory at a time. r must yield at least size bytes: fewer is
// io.ErrUnexpectedEOF, and any error from r (even with the last bytes) abandons the value, so a
// framing check can be done in r. Nothing of an abandoned value is ever read back. Like Put,
// the value is visible to Get when PutFrom returns, and durable after Drain (synced with
// Fsync, when PutFrom returns); unlike Put, PutFrom waits for its own record to be written.
//
// Close waits for PutFrom calls in progress; they stop at their next chunk with ErrClosed.
// In the one-file-per-blob mode values are always read whole first.
func (c *Cache) PutFrom(key []byte, r io.Reader, size int64) error {
	return c.putFrom(key, r, size, nil)
}

// putFrom is PutFrom with the metadata (and condition) m, as for put.
func (c *Cache) putFrom(key []byte, r io.Reader, size int64, m *writeMeta) error {
	if err := c.writable(); err != nil {
		return err
	}
	if err := c.checkKey(key); err != nil {
		return err
	}
	if err := c.checkSize(key, attrsOf(m), size); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("blobcache: PutFrom: negative size %d", size)
	}
	if c.readsWhole(size) {
		return c.putFromBuffered(key, r, size, m) // through put, and its admission
	}
	n := record.HeaderSize + int64(len(key)) + size + int64(len(attrsOf(m)))
	if h := record.KeyHash(key); c.declines(key, h, n, m) {
		return c.decline(key, h, m) // r is not read
	}
	return c.putFromStream(key, r, size, nil, m)
}

// readsWhole reports whether PutFrom reads a value of size bytes whole before it stores it
// through put, rather than streaming it into its segment: a small value, every value of the
// one-file-per-blob mode; and every value a write buffer can hold with compression, so that it
// is compressed, or with a memory tier that values enter as they are written, so that it enters
// (a streamed value would enter on its second hit).
func (c *Cache) readsWhole(size int64) bool {
	return size <= int64(c.chunkSize()) || !c.layout.streams() ||
		c.compresses(size) ||
		c.admitsOnWrite() && size <= c.opts.WriteBufferSize
}

// admitsOnWrite reports whether values enter the memory tier as they are written: with
// MemoryOnWrite, in segments (blobs of PerBlobFiles enter on their second hit).
func (c *Cache) admitsOnWrite() bool {
	return c.mem != nil && c.opts.MemoryAdmission == MemoryOnWrite && !c.opts.PerBlobFiles
}

func (c *Cache) putFromBuffered(key []byte, r io.Reader, size int64, m *writeMeta) error {
	value, err := holdValue(r, int(size))
	if err != nil {
		return err
	}
	if value == nil {
		buf := getBuf(int(size))
		defer putBuf(buf)
		if err := readValue(r, *buf); err != nil {
			return err
		}
		value = *buf
	}
	err = c.put(key, value, 0, false, true, m)
	h := record.KeyHash(key)
	for errors.Is(err, errChanged) && m != nil && m.obs != nil {
		// The value is read: observe again and write it if the condition still holds.
		var o *observation
		if o, err = c.observe(key, h); err != nil {
			return err
		}
		if err = c.refused(key, h, m, o); err != nil {
			if errors.Is(err, errChanged) {
				continue
			}
			return err
		}
		m.obs = o
		err = c.put(key, value, 0, false, true, m)
	}
	return err
}

// holdValue returns the size bytes of value r holds (ValueHolder), consumed; nil if it does not
// hold them.
func holdValue(r io.Reader, size int) ([]byte, error) {
	h, ok := r.(ValueHolder)
	if !ok || size == 0 {
		return nil, nil
	}
	b, ok, err := h.Hold(size)
	if err != nil {
		return nil, fmt.Errorf("blobcache: read value: %w", err)
	}
	if !ok {
		return nil, nil
	}
	if len(b) != size {
		return nil, fmt.Errorf("blobcache: read value: Hold returned %d bytes for %d", len(b), size)
	}
	return b, nil
}

// readValue fills b from r. Unlike io.ReadFull it fails on any error r returns, even one that
// comes with the last bytes.
func readValue(r io.Reader, b []byte) error {
	for len(b) > 0 {
		n, err := r.Read(b)
		b = b[n:]
		if err == io.EOF && len(b) > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("blobcache: read value: %w", err)
		}
	}
	return nil
}

// putFromStream streams a record of size bytes from r (see the top of this file). want, if not
// nil, is the caller's checksum of the value (PutChecksummed): a value that does not match it is
// abandoned with ErrChecksumMismatch.
//
// With m's observation (a conditional write), the reservation is made only if the key is
// unchanged since (errChanged otherwise, nothing read), and the record is published only if it
// still is when the value is written; if not, errChanged is returned and nothing is stored (any
// record that changed the key is placed after this one, so a scan after a crash does not bring
// it back either).
func (c *Cache) putFromStream(key []byte, r io.Reader, size int64, want *uint32, m *writeMeta) error {
	hdr := record.Header{Kind: record.KindPut, KeyLen: uint32(len(key)), ValueLen: uint32(size), CTime: c.opts.Clock().UnixNano()}
	if err := c.stamp(&hdr, m); err != nil {
		return err
	}
	n := hdr.Len()
	var lead int64
	length := n
	if c.opts.directWrites() {
		lead = valueLead(int64(record.HeaderSize+len(key)), int64(c.chunkSize()))
		length = lead + n + record.PadLen(lead+n, vfs.DirectIOAlignment) // the tail pad
	}
	if length > segment.MaxRecordLen(c.opts.SegmentSize) {
		return fmt.Errorf("%w: a record of %d bytes does not fit in a segment of %d", ErrValueTooLarge, length, c.opts.SegmentSize)
	}
	h := record.KeyHash(key)
	s, err := c.w.reserve(h, hdr.Version, key, lead, length, m)
	if err != nil {
		return err
	}
	cr := &countingReader{r: r}
	entry, err := c.fillStream(s, &hdr, key, attrsOf(m), cr, n, want)
	if err == nil {
		c.bloomAdd(h)
	}
	wait, err := c.w.endStream(s, entry, err)
	if errors.Is(err, ErrOutrun) {
		// The segment is released (endStream) and may be evicted; the rest of the value is
		// read and thrown away, so that the caller's stream (a memcached data block, say)
		// stays in step.
		c.stats.streamsOutrun.Add(1)
		if _, rerr := io.CopyN(io.Discard, cr, size-cr.n); rerr != nil {
			return fmt.Errorf("%w; then: blobcache: read value: %w", err, rerr)
		}
		return err
	}
	if err != nil {
		return err
	}
	c.w.waitCommitted(wait)
	c.stats.puts.Add(1)
	return nil
}

// valueLead returns the length of the pad record that, at the start of a DirectIO range, puts
// the value of a record with hk bytes of header and key on a 4 KiB boundary, so that direct
// reads land it in place (as batch.AlignedValueMin values in batches): 0 when it already is, or
// when the record's header and key would not fit in the range's first chunk behind the pad (the
// header must be in the chunk written last; see fillStream).
func valueLead(hk, chunk int64) int64 {
	lead := record.PadLen(hk, vfs.DirectIOAlignment)
	if lead+hk > chunk {
		return 0
	}
	return lead
}

// fillStream writes the record of the reservation s: key and value behind the header, then a
// pad filling the rest of the range, then the first chunk with the header. It returns the
// record's footer entry.
func (c *Cache) fillStream(s *stream, hdr *record.Header, key, attrs []byte, r io.Reader, n int64, want *uint32) (segment.Entry, error) {
	first, spare := c.getChunk(), c.getChunk()
	defer c.putChunk(first)
	defer c.putChunk(spare)
	cw := chunkWriter{c: c, s: s, first: *first, spare: *spare, buf: *first}
	if s.lead > 0 {
		// The lead pad, as reserve wrote it: rewriting it with chunk 0 changes nothing on disk.
		cw.pad(s.lead)
	}
	cw.used += record.HeaderSize // the header goes in last, in chunk 0 (valueLead sees to it)
	cw.emit(key)
	vc := c.writeCheck(c.opts.Checksum || want != nil)
	for left := int64(hdr.ValueLen); left > 0 && cw.err == nil; {
		if c.closed.Load() {
			return segment.Entry{}, ErrClosed
		}
		if s.evicting.Load() {
			return segment.Entry{}, fmt.Errorf("%w: segment %d is due for eviction", ErrOutrun, s.seg.id)
		}
		dst := cw.room()
		dst = dst[:min(int64(len(dst)), left)]
		if err := readValue(r, dst); err != nil {
			return segment.Entry{}, err
		}
		vc.write(dst)
		cw.used += len(dst)
		left -= int64(len(dst))
	}
	cw.emit(attrs)
	if pad := s.length - s.lead - n; pad > 0 {
		cw.pad(pad)
	}
	cw.flush()
	if cw.err != nil {
		return segment.Entry{}, cw.err
	}
	if err := vc.seal(hdr, want); err != nil {
		// The range stays a pad: nothing of the value is stored.
		return segment.Entry{}, err
	}
	hdr.Encode(cw.first[s.lead:s.lead+record.HeaderSize+int64(len(key))], key)
	// The first chunk last: it turns the pad into the record, over a value already written.
	if err := c.writeChunk(s, cw.first[:cw.firstLen], s.base); err != nil {
		return segment.Entry{}, err
	}
	if c.opts.Fsync {
		if err := s.seg.active.Sync(); err != nil {
			return segment.Entry{}, fmt.Errorf("%w: %w", ErrWriteFailed, err)
		}
	}
	return segment.Entry{Hash: record.KeyHash(key), Offset: uint32(s.base + s.lead), Length: uint32(n), Kind: record.KindPut, Flags: hdr.Flags}, nil
}

func (c *Cache) writeChunk(s *stream, b []byte, off int64) error {
	if err := c.segs.writeChunk(s.seg, b, off); err != nil {
		return fmt.Errorf("%w: %w", ErrWriteFailed, err)
	}
	return nil
}

// chunkWriter lays the bytes of a streamed record out in chunks of putChunk bytes from the
// start of its range. It keeps the first chunk, which fillStream writes last, and fills and
// writes the others in spare. Chunk boundaries are multiples of putChunk from the start of
// the range, so with DirectIO every write is aligned; the range's length is aligned too, so
// the last write is.
type chunkWriter struct {
	c        *Cache
	s        *stream
	first    []byte // chunk 0
	firstLen int    // bytes of chunk 0 used, once it is full or the record ends
	spare    []byte
	buf      []byte // first or spare: the chunk being filled
	used     int    // bytes of buf filled
	off      int64  // range offset of buf[0]
	err      error
}

// room returns the free part of the current chunk, after ending it if it is full.
func (w *chunkWriter) room() []byte {
	if w.used == len(w.buf) {
		w.next()
	}
	return w.buf[w.used:]
}

func (w *chunkWriter) emit(p []byte) {
	for len(p) > 0 && w.err == nil {
		k := copy(w.room(), p)
		w.used += k
		p = p[k:]
	}
}

func (w *chunkWriter) zeros(n int) {
	for n > 0 && w.err == nil {
		k := min(n, len(w.room()))
		clear(w.buf[w.used : w.used+k])
		w.used += k
		n -= k
	}
}

// pad lays out a pad record of n bytes.
func (w *chunkWriter) pad(n int64) {
	var ph [record.HeaderSize]byte
	record.EncodePadHeader(ph[:], n)
	w.emit(ph[:])
	w.zeros(int(n - record.HeaderSize))
}

// next ends the current chunk, which is full: chunk 0 is kept, a later one is written; filling
// goes on in spare.
func (w *chunkWriter) next() {
	if w.off == 0 {
		w.firstLen = w.used
	} else {
		w.err = w.c.writeChunk(w.s, w.buf[:w.used], w.s.base+w.off)
	}
	w.buf = w.spare
	w.off += int64(w.used)
	w.used = 0
}

// flush ends the last chunk: it is written, unless it is chunk 0 (the record fits in one).
func (w *chunkWriter) flush() {
	if w.err != nil {
		return
	}
	if w.off == 0 {
		w.firstLen = w.used
		return
	}
	w.err = w.c.writeChunk(w.s, w.buf[:w.used], w.s.base+w.off)
}

// reserve places a range of length bytes for a streamed record of key, lead bytes into it, at the
// end of the active segment and writes the pads that cover it: one of lead bytes, and one from the
// record's place to the end, which the record's header replaces. See the comment at the top of
// stream.go.
func (w *writer) reserve(h, version uint64, key []byte, lead, length int64, m *writeMeta) (*stream, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var r region
	var ghost bool
	for {
		if w.closed {
			return nil, ErrClosed
		}
		if w.broken != nil {
			return nil, w.broken
		}
		w.writeForgotten()
		w.writeStale()
		// An older record of the key in an open batch is cut first, so it is placed before
		// the stream (the stream is then ordered, below).
		r, ghost = w.regionFor(h, key, m)
		if b := w.open[r]; b != nil {
			if _, ok := b.Lookup(h, key); ok {
				if err := w.cut(r); err != nil {
					return nil, err
				}
				continue
			}
		}
		if w.intentsFull() {
			// Every slot of the intent log holds a write not committed yet (intents.go).
			if err := w.cutAll(); err != nil {
				return nil, err
			}
			w.cond.Wait()
			continue
		}
		ready, err := w.c.segs.makeRoom(r, length, 1)
		if err != nil {
			return nil, err
		}
		if ready {
			break
		}
	}
	// From here on mu is held throughout: nothing is placed between the checks above and the
	// reservation.
	obs := m.observed()
	if err := w.stillObserved(h, key, obs); err != nil {
		return nil, err
	}
	ordered := false
	for _, b := range w.c.unflushed.batches() {
		if _, ok := b.Lookup(h, key); ok {
			ordered = true
			break
		}
	}
	w.supersede(h, key)
	// The range is placed now, pads written or not: if they fail, it is a gap (its footer
	// entry, counted, stays unused).
	a, base, err := w.c.segs.reserve(r, length, 1)
	if err != nil {
		return nil, err
	}
	s := &stream{key: bytes.Clone(key), seg: a, base: base, lead: lead, length: length, ordered: ordered, obs: obs}
	w.intendStream(s, h, version)
	// The pads that cover the range until the record replaces the second. Written under mu,
	// before any later batch is placed, so no later batch can be on disk without them; a later
	// batch's sync (with Fsync) makes them durable too. The record's header goes exactly where
	// the second pad's is, so a torn write of it leaves that pad or the record, as without a
	// lead.
	var pad []byte
	if w.c.opts.directWrites() {
		pad = vfs.AlignedBuffer(int(lead) + record.HeaderSize)
	} else {
		pad = make([]byte, lead+record.HeaderSize)
	}
	if lead > 0 {
		record.EncodePad(pad[:lead])
	}
	record.EncodePadHeader(pad[lead:], length-lead) // only the header: a scan steps over a pad by its length
	if err := s.seg.active.Write([][]byte{pad}, s.base); err != nil {
		// The range may hold a torn pad: seal the segment so that its footer, not a scan, is
		// what finds the records placed after it.
		w.c.segs.poison(s.seg)
		return nil, fmt.Errorf("%w: %w", ErrWriteFailed, err)
	}
	if ghost {
		w.c.admitGhost(h)
	}
	w.c.segs.streamStarted(s.seg)
	w.streams = append(w.streams, s)
	w.streamWG.Add(1)
	return s, nil
}

// supersede marks the streams of key in progress as older than a record being placed now. The
// caller holds mu.
func (w *writer) supersede(h uint64, key []byte) {
	for _, s := range w.streams {
		if !s.superseded && bytes.Equal(s.key, key) {
			s.superseded = true
		}
	}
}

// endStream ends stream s, which fillErr says whether it was written. A written stream that no
// newer record superseded is published: into the index at once unless it is ordered, and its
// footer entry through the pipeline. endStream returns the seq to wait for (0: none). A stream
// that failed to write poisons its segment (a torn range must not be scanned through).
//
// Why at once is safe: no older record of the key is in an unflushed batch (so no commit can put
// an older location in the index after this one), and any record of the key placed since the
// reservation superseded the stream. mu orders this with the appends that supersede.
func (w *writer) endStream(s *stream, e segment.Entry, fillErr error) (wait uint64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.streamWG.Done()
	for i, x := range w.streams {
		if x == s {
			w.streams = append(w.streams[:i], w.streams[i+1:]...)
			break
		}
	}
	w.intentsDone()          // the stream's record is in the kernel, or lost and not acknowledged
	defer w.cond.Broadcast() // a conditional write may wait for this stream
	seg := s.seg
	if fillErr != nil && errors.Is(fillErr, ErrWriteFailed) {
		if w.c.segs.isActive(seg) {
			w.c.segs.poison(seg)
		}
		w.lastErr = fillErr
		w.c.stats.flushErrors.Add(1)
	}
	if fillErr == nil && !s.superseded && s.obs != nil && !w.unchanged(record.KeyHash(s.key), s.key, s.obs) {
		fillErr = errChanged
	}
	if fillErr == nil && !s.superseded {
		w.nextSeq++
		job := &flushJob{seq: w.nextSeq, seg: seg, stream: &e, key: s.key, length: s.length}
		if s.ordered {
			wait = job.seq
		} else {
			w.c.indexStream(e, seg.id)
			job.indexed = true
			if job.seq > maxStreamLag {
				wait = job.seq - maxStreamLag
			}
		}
		w.toWrite.push(job)
	}
	// After the publication's job, so that the seal the stream held back follows it.
	w.c.segs.streamEnded(seg)
	if fillErr != nil {
		return 0, fillErr
	}
	return wait, nil
}

// commitStream publishes a streamed record: its footer entry and, unless endStream did it
// already, its index entry. The commit goroutine calls it in seq order.
func (c *Cache) commitStream(j *flushJob) {
	e := *j.stream
	j.seg.active.AddEntry(e)
	if !j.indexed {
		c.indexStream(e, j.seg.id)
	}
	c.stats.flushedBytes.Add(uint64(j.length))
	c.stats.flushes.Add(1)
}

// indexStream puts a streamed record in the index (segment seg) and frees the record it
// replaces.
func (c *Cache) indexStream(e segment.Entry, seg uint32) {
	loc := index.Loc{Segment: seg, Offset: e.Offset, Length: e.Length}
	if old, ok := c.idx.Put(e.Hash, loc); ok {
		c.segs.freeRecord(old, seg)
	}
	// Again, now that the index has it: a rebuild that read the index before this Put (and the
	// write buffer, where a streamed record never is) published its filter before this load of
	// bloomNext, so the hash reaches it (see rebuildBloom). The add before publication covers
	// the moment between idx.Put and this one.
	c.bloomAdd(e.Hash)
}
