package blobcache

import (
	"github.com/seed57392e9e/blobcache/internal/policy"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// What the cache keeps: the eviction policy (Options.Policy), the admission policy
// (Options.Admission) and the write budget (Options.WriteBudget). internal/policy decides;
// region.go, reinsert.go and space.go carry its decisions out, and this file is the API and what
// a declined Put does.
//
// A declined Put is a Put followed at once by an eviction of its blob: it returns nil, the key
// then misses, and no older blob of the key may be read back. So when the key may hold a blob
// (the bloom filter, the write buffer or the index says so), a tombstone is written in place of
// the value, always, whatever the budget: a cache may forget, never serve a stale blob.

// Policy is what eviction does with the records of the oldest segment.
type Policy int

const (
	// PolicyProbation (the default) is S3-FIFO on flash (region.go): new blobs go to a probation region of
	// their own, evicted early; the records hit there are promoted (written once more) into
	// the main region when their segment goes, the others dropped and their keys remembered in
	// a ghost set, so that a Put of one of them soon after goes straight to main. Main is
	// evicted as under PolicyReinsert. Needs a MaxSize of at least four segments; with less, it is
	// PolicyReinsert.
	PolicyProbation Policy = iota
	// PolicyReinsert, one log, writes the records of the oldest segment that were read since they were
	// written (Get, GetRange, ReadAt, GetMany: a hit that returned bytes; not Stat) again at
	// the head before the segment is evicted, within Options.ReinsertShare of the writes, with
	// their version, expiry, flags and attributes; the others go with the segment.
	PolicyReinsert
	// PolicyFIFO evicts the oldest segment whole, reading nothing.
	PolicyFIFO
)

func (p Policy) String() string {
	switch p {
	case PolicyReinsert:
		return "reinsert"
	case PolicyFIFO:
		return "fifo"
	case PolicyProbation:
		return "probation"
	}
	return "Policy(?)"
}

// Admission decides whether a Put is written to the device. Admit is called on the Put's
// goroutine, concurrently from many, before anything is written; it must be fast and must not
// call back into the cache. hash is the cache's 64-bit hash of key (xxHash64), for policies
// that remember keys by fingerprint; size is the record's bytes on the device (value, key,
// attributes and a 64-byte header).
type Admission interface {
	Admit(key []byte, hash uint64, size int64) bool
}

// AdmitAll admits every Put (the default).
func AdmitAll() Admission { return admitAll{} }

type admitAll struct{}

func (admitAll) Admit([]byte, uint64, int64) bool { return true }

// AdmitOnSecondPut declines the Put of a key it has not seen recently and remembers the key's
// hash in a bounded ghost set of about remember hashes (4.6 bytes each, the oldest forgotten
// first; see internal/ghost); a Put of a key in the set is admitted. In a look-aside cache a
// Put follows a miss, so a blob is written on its second miss within the ghost's memory: blobs
// asked for once are never written. A remember of about the number of blobs the cache holds
// is a good start.
func AdmitOnSecondPut(remember int) Admission { return policy.NewSecondPut(remember) }

// newPolicy is what the cache with options o keeps (internal/policy decides).
func newPolicy(o *Options) *policy.Policy {
	kind := policy.KindReinsert
	switch o.Policy {
	case PolicyProbation:
		kind = policy.KindProbation
	case PolicyFIFO:
		kind = policy.KindFIFO
	}
	maxSize := o.MaxSize
	if o.PerBlobFiles {
		maxSize = 0 // blob files are evicted one by one, oldest first, and never read back
	}
	p := &policy.Policy{Rules: policy.New(policy.Config{Kind: kind, MaxSize: maxSize, SegmentSize: o.SegmentSize, MaxCopy: o.WriteBufferSize})}
	if o.Admission != nil {
		p.Admission = o.Admission.Admit
	}
	if o.WriteBudget > 0 {
		p.Budget = policy.NewBudget(o.WriteBudget, o.Clock)
	}
	return p
}

// declines reports whether the policy declines the unconditional Put of a record of n bytes
// under key (m as for put): by Options.Admission, then by the write budget.
func (c *Cache) declines(key []byte, h uint64, n int64, m *writeMeta) bool {
	return c.keep.Filters() && admits(m) && !c.keep.Admit(key, h, n)
}

// admits reports whether a write with meta m goes through admission: not a conditional write,
// nor a Touch.
func admits(m *writeMeta) bool {
	return m == nil || m.cond.kind == always && m.keep == 0
}

// decline completes a declined Put of key (hash h; m as for put): counted, the version it would
// have had handed out (PutWith returns it; no record carries it), and the key's older blob, if
// it may have one, made unreadable by a tombstone.
func (c *Cache) decline(key []byte, h uint64, m *writeMeta) error {
	c.stats.declined.Add(1)
	if m != nil {
		v, err := c.vers.next()
		if err != nil {
			return err
		}
		m.version = v
	}
	if !c.bloom.Load().Test(bloomHash(h)) {
		return nil // never stored
	}
	var l keyLookup
	l.start(c, key, h, nil)
	if v, ok := l.buffered(); ok && v.Kind != record.KindPut || !ok && !l.inIndex() {
		return nil // no blob to hide
	}
	hdr := record.Header{Kind: record.KindDelete, KeyLen: uint32(len(key)), CTime: c.opts.Clock().UnixNano()}
	if err := c.stamp(&hdr, nil); err != nil {
		return err
	}
	c.keep.Charge(hdr.Len())
	_, err := c.w.append(h, hdr, key, nil, true, nil, nil)
	return err
}
