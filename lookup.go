package blobcache

import (
	"errors"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// The lookup protocol, the one way every read finds a key (Get, GetRange, ReadAt, Stat,
// Delete):
//
//  1. the bloom filter: a key it rejects is absent, at no I/O (the caller tests it before it
//     builds a lookup, with the filter's Test inlined: a miss costs nanoseconds, and every
//     call or copy on this path shows);
//  2. the write buffer, newest batch first (read-your-writes): a record there decides;
//  3. the index, then the record's entry in the memory tier if it holds it (memory.go), else
//     the file that holds the record, taken with a reader reference.
//
// The index may move under a read: an overwrite, a delete or an eviction frees the bytes the
// read found. So a read checks, after it has its bytes, that the index still maps the key to
// the same location (stillAt); if not, it looks again, lookupTries times in all, then misses.
// The record's header and key are checked the same way everywhere (checkHeader).
//
//	h := record.KeyHash(key)
//	if !c.bloom.Load().Test(bloomHash(h)) { ... } // step 1
//	var l keyLookup
//	l.start(c, key, h, stripe)
//	if v, ok := l.buffered(); ok { ... }     // step 2 (bufferedWhole, bufferedValue)
//	for l.next() {                           // step 3, once per try: l.loc, l.file, l.recOff
//		... read, check, decide: hit, miss, or try again ...
//	}
//
// A lookup lives on its caller's stack: it allocates nothing.
type keyLookup struct {
	c   *Cache
	key []byte
	h   uint64
	st  *counterStripe // where hits and misses are counted; nil for Stat and Delete

	// memOK says the caller serves a record from the memory tier (memory.go) when it holds it.
	memOK bool
	// accept is the codec whose stored bytes the caller takes as they are (OpenEncoded), or 0.
	accept uint8
	// residentOnly says the caller opens no file (OpenResidentInto): next stops where it would,
	// and sets wouldOpen.
	residentOnly, wouldOpen bool

	tries int
	// Set by next: the record's location and its hit count in the index when looked up, and
	// either its entry in the memory tier (mem, and no file) or the file holding it (with a
	// reader reference the caller releases or hands on) and its offset in the file.
	loc    index.Loc
	hits   int
	mem    *memtier.Entry
	file   *segHandle
	recOff int64
}

// lookupTries bounds the index lookups of one read that sees the index move under it.
const lookupTries = 3

// start starts the lookup, past step 1, of key, whose hash is h; st, if not nil, is where its
// hits and misses are counted.
func (l *keyLookup) start(c *Cache, key []byte, h uint64, st *counterStripe) {
	l.c, l.key, l.h, l.st = c, key, h, st
}

// buffered runs step 2: the newest record of the key in the write buffer, if any (a put or a
// tombstone), without its value.
func (l *keyLookup) buffered() (batch.Value, bool) {
	return l.c.unflushed.lookup(l.h, l.key)
}

// bufferedWhole is buffered for Get: a put comes with a copy of its value, decompressed, in buf
// (from getBuf, for the caller to give back) unless buf is nil.
func (l *keyLookup) bufferedWhole() (v batch.Value, buf *[]byte, ok bool, err error) {
	return l.c.unflushed.lookupValue(l.h, l.key)
}

// bufferedValue is buffered for ReadAt: a put's value bytes [off, off+len(p)) are copied into
// p, n of them.
func (l *keyLookup) bufferedValue(p []byte, off int64) (v batch.Value, n int, ok bool, err error) {
	return l.c.unflushed.readValue(l.h, l.key, p, off)
}

// next runs step 3 once: it finds the key's location in the index and takes the file holding
// the record. It returns false when the key is not in the index (a bloom false positive, or
// deleted meanwhile) or the tries are used up; the lookup is then a miss, counted.
func (l *keyLookup) next() bool {
	for l.locate() {
		if e := l.fromMemory(l.loc); e != nil {
			l.mem, l.file = e, nil
			return true
		}
		if l.residentOnly {
			l.wouldOpen = true
			return false
		}
		if l.acquire() {
			return true
		}
		// Gone since the index said so: look again.
	}
	return false
}

// locate runs step 3's index lookup once: l.loc is the key's location. It returns false when the
// key is not in the index (a bloom false positive, or deleted meanwhile) or the tries are used
// up; the lookup is then a miss, counted.
func (l *keyLookup) locate() bool {
	if l.tries >= lookupTries {
		l.miss()
		return false
	}
	l.tries++
	loc, hits, ok := l.c.idx.Lookup(l.h)
	if !ok {
		if l.st != nil {
			l.st.falsePositives.Add(1)
		}
		return false
	}
	l.loc, l.hits = loc, hits
	return true
}

// acquire takes the file holding the record at l.loc, with a reader reference, and its offset
// in it; false if the file is gone since the index gave the location.
func (l *keyLookup) acquire() bool {
	s, recOff := l.c.layout.acquire(l.h, l.loc)
	if s == nil {
		return false
	}
	l.file, l.recOff = s, recOff
	return true
}

// inIndex reports whether the index holds the key (Delete's step 3: it reads no record).
func (l *keyLookup) inIndex() bool {
	_, ok := l.c.idx.Get(l.h)
	return ok
}

// stillAt reports whether the index still maps the key to the location next found. A read
// that found its bytes and then sees the same location knows they were not freed (and punched
// out) before it read them.
func (l *keyLookup) stillAt() bool { return l.c.stillAt(l.h, l.loc) }

func (l *keyLookup) hit() {
	if l.st != nil {
		l.st.hits.Add(1)
	}
}

// touched notes a hit that returned bytes of the record l found: its access bit, for
// reinsertion (see reinsert.go), for the read path's choice (see readroute.go), for the
// memory tier's admission (memory.go) and for the unfetched counts of Stats.
//
// A count the lookup found at index.MaxHits is left as it is: Touch would not change it, and
// skipping it spares a hot record's hits a second visit to the index (its lock and its slot).
func (l *keyLookup) touched() {
	if l.hits < index.MaxHits && l.c.countsAccess() {
		l.c.idx.Touch(l.h, l.loc)
	}
}

// countsAccess reports whether hits are counted in the index: not when nothing decides by them
// (PolicyFIFO with DirectIOReads or BufferedReads, and no memory tier).
func (c *Cache) countsAccess() bool { return c.countsHits() || c.routesReads() || c.mem != nil }

func (l *keyLookup) miss() {
	if l.st != nil {
		l.st.misses.Add(1)
	}
}

// prefixLen is how many bytes of the record at l.loc hold its header and key: those of a
// record of the current format, as the read is planned before the header is decoded (a legacy
// header is shorter; see record.Header.Legacy), cut to the record's length.
func (l *keyLookup) prefixLen() int64 {
	return min(int64(record.HeaderSize+len(l.key)), int64(l.loc.Length))
}

// live tells whether the record with header hdr (this key's, checked) is still to be served:
// not expired, not invalidated. A record that is not is a miss, counted, and its key is queued
// for a tombstone so that its space is reclaimed as an overwritten record's is.
func (l *keyLookup) live(version uint64, ctime, expires int64) bool {
	var now int64
	f := l.c.vers.fateOf(version, ctime, expires, &now)
	if f == fresh {
		return true
	}
	// Where the record is: in the write buffer (found before next ran), or at l.loc.
	o := observation{buffered: l.tries == 0, rawVersion: version, inIndex: l.tries > 0, loc: l.loc}
	if f == expired && o.inIndex && l.c.countsAccess() && l.hits == 0 {
		l.c.stats.expiredUnfetched.Add(1)
	}
	l.c.dropStale(l.key, f, o)
	return false
}

// checkHeader checks the header and key b of the record at l.loc, read from the file (at least
// prefixLen bytes): a put of this key, as long as the index says. A record of another key with the same hash
// (a collision) is not this key's: ok false. Damage (a header that fails its checks, a record
// that is not a put, a length that disagrees with the index) is counted and noted, and is a
// miss as well.
func (l *keyLookup) checkHeader(b []byte) (hdr record.Header, ok bool) {
	hdr, k, err := record.Decode(b)
	if errors.Is(err, record.ErrTruncated) && int64(len(b)) < int64(l.loc.Length) && hdr.KeyLen > uint32(len(l.key)) {
		// b holds what this key's header and key would take, and the record says its key
		// is longer: another key with the same hash, or damage. Read the record's header
		// and key whole to tell which (this path allocates; it is rare).
		full := make([]byte, min(hdr.Size()+int64(hdr.KeyLen), int64(l.loc.Length)))
		if _, rerr := l.file.rd.ReadAt(full, l.recOff); rerr == nil {
			hdr, k, err = record.Decode(full)
		}
	}
	if err == nil && hdr.Kind != record.KindPut {
		err = fmt.Errorf("%w: a %v record where the index has a put", record.ErrBadKind, hdr.Kind)
	}
	if err == nil && string(k) == string(l.key) && hdr.Len() != int64(l.loc.Length) {
		err = fmt.Errorf("%w: a record of %d bytes, the index says %d", record.ErrBadLength, hdr.Len(), l.loc.Length)
	}
	if err != nil {
		l.c.stats.corrupt.Add(1)
		l.c.noteCorruption(fmt.Errorf("%w: segment %d offset %d: %w", ErrCorrupt, l.loc.Segment, l.loc.Offset, err))
		return hdr, false
	}
	return hdr, string(k) == string(l.key)
}

// readAttrs returns a copy of the attributes of the record l found, whose header hdr was
// checked: from b, which holds the start of the record, if they are in it, else read from the
// file l holds (one more read, for a large blob with attributes). Damaged attributes are a miss,
// counted like a damaged header.
func (l *keyLookup) readAttrs(hdr record.Header, b []byte) (string, openResult, error) {
	if hdr.AttrLen == 0 {
		return "", openHit, nil
	}
	attrs := make([]byte, hdr.AttrLen)
	if off := hdr.AttrOffset(); off+int64(hdr.AttrLen) <= int64(len(b)) {
		copy(attrs, b[off:])
	} else {
		_, err := l.file.rd.ReadAt(attrs, l.recOff+off)
		if !l.stillAt() {
			return "", openRetry, nil
		}
		if err != nil {
			l.c.stats.readErrors.Add(1)
			return "", openHit, fmt.Errorf("blobcache: read segment %d offset %d: %w", l.loc.Segment, l.loc.Offset, err)
		}
	}
	if err := record.CheckAttrs(hdr, attrs); err != nil {
		l.c.stats.corrupt.Add(1)
		l.c.noteCorruption(fmt.Errorf("%w: segment %d offset %d: %w", ErrCorrupt, l.loc.Segment, l.loc.Offset, err))
		return "", openMiss, nil
	}
	return string(attrs), openHit, nil
}

// stillAt reports whether the index still maps h to loc.
func (c *Cache) stillAt(h uint64, loc index.Loc) bool {
	now, ok := c.idx.Get(h)
	return ok && now == loc
}
