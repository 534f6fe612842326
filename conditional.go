package blobcache

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// Writes with metadata and preconditions: PutWith, PutFromWith, DeleteIf, Touch, and
// InvalidateAll.
//
// A conditional write is optimistic. It first observes the key as a read does (the write buffer,
// then the index and the record's header on disk, without the writer's lock), tests its
// precondition against what it saw, and then, under the writer's lock, appends its record only
// if the key's newest record is still the one it saw: the same version in the write buffer, or
// the same index location. Otherwise it observes again. A precondition that fails is reported
// only after the same check under the lock, so a refusal, like a success, is decided on what the
// key held at one moment (refused). No disk read happens under the lock, and
// unconditional writes pay nothing for it. A PutFrom of the key still streaming its value is
// waited for: its record is about to become the newest.

// PutOptions are the optional parts of a write. The zero value is a plain Put: no expiry, flags
// 0, no precondition.
type PutOptions struct {
	// Expires is when the blob becomes a miss for Get, GetRange, ReadAt and Stat; zero:
	// never. Its space is reclaimed like an overwritten blob's once a read finds it expired,
	// or with its segment.
	Expires time.Time
	// Flags are stored with the blob and returned in BlobInfo.Flags, never interpreted (the
	// memcached client flags).
	Flags uint32
	// If is the condition on the key's current blob for the write to happen; zero: none.
	If Precondition
	// Attrs are stored with the blob and returned in BlobInfo.Attrs, never interpreted (the
	// HTTP server keeps a blob's Content-Type there); at most MaxAttrLen bytes.
	Attrs string
}

// MaxAttrLen is the most bytes PutOptions.Attrs may hold.
const MaxAttrLen = record.MaxAttrLen

// Precondition is a condition on the blob a key holds when a write happens.
type Precondition struct {
	kind    precondKind
	version uint64
}

type precondKind uint8

const (
	always precondKind = iota
	ifAbsent
	ifPresent
	ifVersion
)

// IfAbsent holds when the key has no blob (or an expired one): ErrExists otherwise.
func IfAbsent() Precondition { return Precondition{kind: ifAbsent} }

// IfPresent holds when the key has a blob: ErrNotFound otherwise.
func IfPresent() Precondition { return Precondition{kind: ifPresent} }

// IfVersion holds when the key's blob has version v (BlobInfo.Version): ErrNotFound when the key
// has no blob, ErrExists when it has another version.
func IfVersion(v uint64) Precondition { return Precondition{kind: ifVersion, version: v} }

// check tests p against what o saw.
func (p Precondition) check(o *observation) error {
	switch p.kind {
	case ifAbsent:
		if o.present {
			return fmt.Errorf("%w: the key has a blob (version %d)", ErrExists, o.version)
		}
	case ifPresent:
		if !o.present {
			return ErrNotFound
		}
	case ifVersion:
		if !o.present {
			return ErrNotFound
		}
		if o.version != p.version {
			return fmt.Errorf("%w: version %d, not %d", ErrExists, o.version, p.version)
		}
	}
	return nil
}

// writeMeta is what a write stores beside its value, and the condition it is under.
type writeMeta struct {
	expires     int64 // Unix nanoseconds; 0: never
	clientFlags uint32
	// keep, if not 0, is the version to store (Touch keeps the blob's); otherwise a new one is
	// handed out.
	keep uint64
	// version is the version the write stored.
	version uint64
	attrs   []byte // stored after the value (PutOptions.Attrs)
	cond    Precondition
	// obs is what the write saw of the key, when it has a condition; the writer checks it is
	// still so (see writer.unchanged).
	obs *observation
	// toMain sends the record to the main region whatever the key's newest record (region.go):
	// promotions, reinsertions and tombstones that must hide records anywhere.
	toMain bool
	// hits is the hit count a copy's index entry starts with (reinsert.go).
	hits uint8
}

// observed is what m's write saw of its key, nil for a write without a precondition.
func (m *writeMeta) observed() *observation {
	if m == nil {
		return nil
	}
	return m.obs
}

func metaOf(o PutOptions) *writeMeta {
	m := &writeMeta{clientFlags: o.Flags, cond: o.If}
	if o.Attrs != "" {
		m.attrs = []byte(o.Attrs)
	}
	if !o.Expires.IsZero() {
		m.expires = max(o.Expires.UnixNano(), 1)
	}
	return m
}

// observation is what a conditional write saw of its key.
type observation struct {
	present bool   // a live put
	version uint64 // its version as callers see it (BlobInfo.Version)

	// Where the newest record was: in the write buffer (with this raw version, which every
	// record this build writes has), or at loc in the index (inIndex false: nowhere).
	buffered   bool
	rawVersion uint64
	inIndex    bool
	loc        index.Loc
}

// errChanged says the key's newest record is no longer the observed one: observe again.
var errChanged = errors.New("blobcache: key changed while writing")

// observe finds the newest record of key (hash h), as a conditional write must test it.
func (c *Cache) observe(key []byte, h uint64) (*observation, error) {
	o := new(observation)
	var l keyLookup
	l.start(c, key, h, nil)
	if v, ok := l.buffered(); ok {
		o.buffered, o.rawVersion = true, v.Version
		if v.Kind == record.KindPut && l.live(v.Version, v.CTime, v.Expires) {
			o.present, o.version = true, infoOf(pendingHeader(v), "").Version
		}
		return o, nil
	}
	for {
		loc, ok := c.idx.Get(h)
		if !ok {
			o.inIndex, o.loc = false, index.Loc{}
			return o, nil
		}
		o.inIndex, o.loc = true, loc
		// A lookup that sees the index move under it too often gives up (a miss, for a read);
		// here the index alone says whether the key has a record, so the tries start again
		// each round, and a round that fails saw another write of the key land.
		l.tries, l.file = 0, nil
		if !l.next() {
			if now, ok := c.idx.Get(h); ok && now == loc {
				// Not moved, yet its file was gone: a cache closing under the write (or a file
				// it cannot open). The writer's check, or its closed state, decides; looking
				// again would spin.
				return o, nil
			}
			continue
		}
		if l.loc != loc {
			l.file.unref()
			continue
		}
		hdr, _, res, err := c.stat(&l)
		switch res {
		case openHit:
			if err != nil {
				return nil, err
			}
			if l.live(hdr.Version, hdr.CTime, hdr.Expires) {
				o.present, o.version = true, infoOf(hdr, "").Version
			}
			return o, nil
		case openMiss:
			return o, nil // another key's record, or damaged: this key has no blob
		}
	}
}

// PutWith stores value under key, with the expiry, flags and precondition of o, and returns the
// version it stored. A failed precondition stores nothing and returns ErrExists or ErrNotFound.
// Like Put, it copies value.
func (c *Cache) PutWith(key, value []byte, o PutOptions) (version uint64, err error) {
	m := metaOf(o)
	err = c.conditionally(key, m, func() error { return c.put(key, value, 0, false, true, m) })
	return m.version, err
}

// PutFromWith is PutFrom with the options of PutWith. A precondition is tested before the value
// is read and again, atomically, when its record is published; a value that was read while
// another write of the key landed returns ErrConflict and is not stored (the reader is
// consumed: the caller decides whether to try again). A value of at most StreamThreshold bytes is read
// first and written like PutWith's, so it never gets ErrConflict.
func (c *Cache) PutFromWith(key []byte, r io.Reader, size int64, o PutOptions) (version uint64, err error) {
	m := metaOf(o)
	cr := &countingReader{r: r}
	err = c.conditionally(key, m, func() error {
		if cr.n > 0 {
			return ErrConflict // the key changed after the value was read: it is gone
		}
		return c.putFrom(key, cr, size, m)
	})
	return m.version, err
}

// DeleteIf is Delete under precondition p (IfPresent or IfVersion; IfAbsent deletes nothing).
func (c *Cache) DeleteIf(key []byte, p Precondition) error {
	m := &writeMeta{cond: p}
	return c.conditionally(key, m, func() error { return c.delete(key, m) })
}

// Touch sets the expiry of the blob under key (zero: never), keeping its value, flags and
// version. The record is written again (a blob is never changed in place), so a touch costs a
// write of the blob. It returns ErrNotFound for a missing key.
func (c *Cache) Touch(key []byte, expires time.Time) error {
	if err := c.writable(); err != nil {
		return err
	}
	for {
		r, ok := c.get(nil, key, 0, -1, false, 0)
		if !ok {
			return ErrNotFound
		}
		info := r.Info()
		m := metaOf(PutOptions{Expires: expires, Flags: info.Flags, If: IfVersion(info.Version), Attrs: info.Attrs})
		m.keep = info.Version
		err := c.conditionally(key, m, func() error { return c.putFrom(key, r, info.Size, m) })
		r.Close()
		if errors.Is(err, ErrExists) || errors.Is(err, ErrConflict) {
			continue // written meanwhile: touch the newer blob
		}
		return err
	}
}

// InvalidateAll makes every blob stored before at a miss from at on (memcached's flush_all); at
// not after now invalidates everything stored so far, at once. Nothing is rewritten: the point
// is kept in the directory's state file, durably before InvalidateAll returns, and the space of
// the invalidated blobs is reclaimed with their segments.
func (c *Cache) InvalidateAll(at time.Time) error {
	if err := c.writable(); err != nil {
		return err
	}
	c.stats.invalidations.Add(1)
	return c.vers.invalidate(at, c.opts.Clock())
}

// Now is the time by the cache's clock (Options.Clock), by which expiry is measured.
func (c *Cache) Now() time.Time { return c.opts.Clock() }

// conditionally runs write, which appends the record of a write with meta m, under m's
// precondition: when there is one, it observes the key, tests it, and runs write with the
// observation for the writer to check; write returns errChanged when the key changed since.
func (c *Cache) conditionally(key []byte, m *writeMeta, write func() error) error {
	if m.cond.kind == always {
		return write()
	}
	if err := c.writable(); err != nil {
		return err
	}
	if err := c.checkKey(key); err != nil {
		return err
	}
	h := record.KeyHash(key)
	for {
		o, err := c.observe(key, h)
		if err != nil {
			return err
		}
		if err := c.refused(key, h, m, o); err != nil {
			if errors.Is(err, errChanged) {
				continue
			}
			return err
		}
		m.obs = o
		if err := write(); !errors.Is(err, errChanged) {
			return err
		}
	}
}

// refused tests m's precondition against o, what a conditional write saw of key (hash h). A
// failure is reported only once the writer confirms the key's newest record is still the
// observed one (writer.stillSees): observe reads without the writer's lock, and can see a record
// gone from the index before its copy (a reinsertion) is found in the write buffer. So a write
// refused for a key that had no blob, or had another version, was refused on what the key held
// at one moment, as a write that succeeds is published on it. errChanged: observe again.
func (c *Cache) refused(key []byte, h uint64, m *writeMeta, o *observation) error {
	err := m.cond.check(o)
	if err == nil {
		return nil
	}
	if !c.w.stillSees(h, key, o) {
		return errChanged
	}
	c.stats.condFailed.Add(1)
	return err
}
