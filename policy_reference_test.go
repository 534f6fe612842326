package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/policy"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// The reference test of the policies' mechanics: one trace through the cache and through
// refCache, a plain simulation of what region.go, reinsert.go and space.go document (FIFO logs of
// whole segments, promotion, reinsertion, the victim's eviction, the ghost fed, the reinsertion
// credit spent), request by request, taking each decision from a policy.Rules of its own (the
// rules themselves are held to the documented policy by internal/policy's TestModel). After every request both must agree on hit or miss, on the segment and hit count of
// every key, and on the counters of evictions, copies, promotions, ghost admissions and drops.
//
// The geometry (and a file system without hole punching) makes every decision observable and the cache's background work settle before the
// next request: a record fills a write buffer (so every record is its own batch, placed as soon
// as it is appended), a segment holds refPerSeg records with less than a block to spare (so a
// sealed segment takes exactly refSegSize on disk), Fsync makes seals part of the commit that
// Drain waits for, and after each request the test drains the cache and waits for the
// reinserter until nothing is left open.

const (
	refKeyLen   = 5           // "k0000"
	refRecord   = 64<<10 - 64 // record bytes: a 64 KiB write buffer holds one, and is cut at once
	refValue    = refRecord - record.HeaderSize - refKeyLen
	refPerSeg   = 4              // records a segment holds
	refSegments = 20             // MaxSize in segments
	refBlock    = int64(4 << 10) // file system block
	refKeys     = 300            // keys of the trace
)

// refSegSize is a segment of refPerSeg records, their footer entries and the trailer, with less
// than a block left over.
var refSegSize = alignUp(segment.HeaderSize+refPerSeg*(refRecord+segment.EntrySize)+segment.TrailerSize, refBlock)

func TestPolicyReference(t *testing.T) {
	for _, p := range []Policy{PolicyFIFO, PolicyReinsert, PolicyProbation} {
		t.Run(p.String(), func(t *testing.T) {
			requests := 3000
			if testing.Short() || raceEnabled {
				requests = 1000 // the race detector slows it tenfold
			}
			testPolicyReference(t, p, requests, 1)
		})
	}
}

func testPolicyReference(t *testing.T, p Policy, requests int, seed uint64) {
	c := open(t, t.TempDir(), withFS(noPunchFS{vfs.Default}), WithBufferedWrites(true), WithFsync(true), WithWriteBufferSize(64<<10),
		WithSegmentSize(refSegSize), WithMaxSize(refSegments*refSegSize), WithExpectedBlobs(1<<10), WithPolicy(p))
	defer c.Close()
	m := newRefCache(p)
	if got := c.probationOn(); got != m.regions {
		t.Fatalf("two regions: cache %v, model %v", got, m.regions)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	zipf := rand.NewZipf(rng, 1.1, 1, refKeys-1)
	var hits int
	for step := range requests {
		k := fmt.Sprintf("k%04d", zipf.Uint64())
		want := m.get(k)
		r, got := c.Get([]byte(k))
		if got != want {
			t.Fatalf("request %d (%s): cache hit %v, model hit %v", step, k, got, want)
		}
		if got {
			hits++
			v, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(v, value(k, 0, refValue)) {
				t.Fatalf("request %d (%s): %d bytes read (%v), not the value put", step, k, len(v), err)
			}
			r.Close()
		} else {
			if err := c.Put([]byte(k), value(k, 0, refValue)); err != nil {
				t.Fatal(err)
			}
			m.put(k)
		}
		settle(t, c)
		m.settle()
		m.compare(t, c, step, k)
	}
	t.Logf("%v: %d requests, %d hits; evictions %d, copied %d (promoted %d), ghost admits %d, passed over %d",
		p, requests, hits, m.evictions, m.copied, m.promoted, m.ghostAdmits, m.dropped)
	if m.evictions == 0 || p != PolicyFIFO && m.copied == 0 || p == PolicyProbation && (m.promoted == 0 || m.ghostAdmits == 0) {
		t.Fatalf("the trace did not exercise the policy: evictions %d, copied %d, promoted %d, ghost admits %d",
			m.evictions, m.copied, m.promoted, m.ghostAdmits)
	}
}

// noPunchFS is a file system that cannot punch holes: a sealed segment keeps its size until it
// is evicted, whatever its records become (hole punching is space.go's business, not the
// policy's, and its timing is not the policy's either).
type noPunchFS struct{ vfs.FS }

type noPunchFile struct{ vfs.File }

func (f noPunchFile) PunchHole(int64, int64) error { return errors.ErrUnsupported }

func (fs noPunchFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noPunchFile{f}, nil
}

// settle drains c and waits for the reinserter until neither changes anything: the copies a
// scan appended are committed, and the scans their rotations made due are done.
func settle(t *testing.T, c *Cache) {
	t.Helper()
	activity := func() [3]uint64 {
		st := c.Stats()
		return [3]uint64{st.Flushes, st.Reinserted, st.ReinsertDropped}
	}
	for range 100 {
		before := activity()
		c.Drain()
		if c.rs != nil {
			c.rs.wait()
		}
		c.Drain()
		if activity() == before {
			return
		}
	}
	t.Fatal("the cache does not settle")
}

// refSeg is a segment of the model.
type refSeg struct {
	id     uint32
	region region
	keys   []string // in the order placed
	open   bool
}

// disk is what the segment counts toward the disk: while it is active, what is preallocated
// (the first half, in whole blocks; the whole once its records pass that); once sealed, its records, footer
// and trailer in whole blocks.
func (s *refSeg) disk() int64 {
	switch half := alignUp(refSegSize/2, refBlock); {
	case !s.open:
		return alignUp(s.sealedSize(), refBlock)
	case s.sealedSize() > half:
		return refSegSize
	default:
		return half
	}
}

func (s *refSeg) sealedSize() int64 {
	return segment.HeaderSize + int64(len(s.keys))*(refRecord+segment.EntrySize) + segment.TrailerSize
}

// refCache is the model: the documented mechanics, with none of the machinery, deciding by
// rules.
type refCache struct {
	policy  Policy
	rules   policy.Rules
	regions bool
	segs    []*refSeg // in id order
	active  [numRegions]*refSeg
	where   map[string]*refSeg // the segment of each key's record
	hits    map[string]int
	credit  policy.Credit
	floor   uint32 // main's active segment must be at least this new (rule 2)
	nextID  uint32
	scanned [numRegions]uint32
	placing string // the key whose record is being placed

	evictions, copied, promoted, ghostAdmits, dropped uint64
}

func newRefCache(p Policy) *refCache {
	o := Options{Policy: p, MaxSize: refSegments * refSegSize, SegmentSize: refSegSize, WriteBufferSize: 64 << 10}
	m := &refCache{policy: p, rules: newPolicy(&o).Rules, where: map[string]*refSeg{}, hits: map[string]int{}}
	m.regions = m.rules.Regions() == 2
	m.credit = policy.NewCredit(m.rules, 0.8, refSegSize) // ReinsertShare's default
	return m
}

func (m *refCache) get(k string) bool {
	if m.where[k] == nil {
		return false
	}
	m.hits[k] = min(m.hits[k]+1, index.MaxHits)
	return true
}

// put writes a key the cache does not hold: to probation, or to main if the ghost remembers it.
func (m *refCache) put(k string) {
	h := record.KeyHash([]byte(k))
	r, ghost := m.rules.Route(policy.Write{Hash: h})
	m.place(k, r, 0)
	if ghost {
		m.rules.Admitted(h)
		m.ghostAdmits++
	}
	m.credit.Earn(refRecord)
}

// place appends k's record to region r's active segment, making room first, and rotating if
// the segment is full or, for main, older than the floor.
func (m *refCache) place(k string, r region, hits int) {
	a := m.active[r]
	rotate := a == nil || len(a.keys) == refPerSeg || r == mainRegion && a.id < m.floor
	m.placing = k
	m.makeRoom(r, k, rotate)
	m.placing = ""
	if rotate {
		if a != nil {
			a.open = false
		}
		m.nextID++
		a = &refSeg{id: m.nextID, region: r, open: true}
		m.segs = append(m.segs, a)
		m.active[r] = a
	}
	a.keys = append(a.keys, k)
	m.where[k] = a
	m.hits[k] = hits
}

func (m *refCache) diskBytes() (all, main int64) {
	for _, s := range m.segs {
		all += s.disk()
		if s.region == mainRegion {
			main += s.disk()
		}
	}
	return all, main
}

// makeRoom evicts until one more record fits: the records held (active segments counted by
// what they hold) within MaxSize, and, if it needs a new segment, the files with that segment's
// first allocation within MaxSize plus one segment.
func (m *refCache) makeRoom(r region, k string, rotate bool) {
	maxSize := refSegments * refSegSize
	for {
		all, _ := m.diskBytes()
		held := all + refRecord + segment.EntrySize
		for _, a := range m.active {
			if a != nil {
				held -= max(a.disk()-a.sealedSize(), 0)
			}
		}
		// The files grow by the new segment's first half, or by the active segment's second
		// half once its records pass the first.
		grows := alignUp(refSegSize/2, refBlock)
		if a := m.active[r]; !rotate {
			grows = (&refSeg{keys: append(slices.Clone(a.keys), k), open: true}).disk() - a.disk()
		} else {
			held += segment.HeaderSize + segment.TrailerSize
		}
		over := held > maxSize || all+grows > maxSize+refSegSize
		if !over {
			return
		}
		v := m.victim()
		if v == nil || v == m.active[r] && !m.regions {
			return
		}
		if v.open {
			panic(fmt.Sprintf("model: the victim, segment %d, is active: not modelled", v.id))
		}
		m.evict(v)
	}
}

// victim is the segment eviction takes next (Cache.victim): the oldest of the region the rules
// choose.
func (m *refCache) victim() *refSeg {
	var oldest [numRegions]*refSeg
	var logs policy.Logs
	for _, s := range m.segs {
		if oldest[s.region] == nil {
			oldest[s.region] = s
			logs.Oldest[s.region] = policy.Segment{ID: s.id, Live: true, Open: s.open}
		}
	}
	_, logs.MainBytes = m.diskBytes()
	r, ok := m.rules.Victim(logs)
	if !ok {
		return nil
	}
	return oldest[r]
}

func (m *refCache) evict(v *refSeg) {
	m.rules.Evicting(v.region, len(m.where))
	for _, k := range v.keys {
		if m.where[k] != v {
			continue
		}
		delete(m.where, k)
		delete(m.hits, k)
		if m.rules.Remembers(v.region) && k != m.placing { // a key being written again was not dropped
			m.rules.Dropped(v.region, record.KeyHash([]byte(k)))
		}
	}
	m.segs = slices.DeleteFunc(m.segs, func(s *refSeg) bool { return s == v })
	m.evictions++
}

// settle does what the reinserter does once the disk is within two segments of MaxSize: scan
// the oldest sealed segment of each region, main first, once.
func (m *refCache) settle() {
	if m.policy == PolicyFIFO {
		return
	}
	for {
		all, _ := m.diskBytes()
		if all <= (refSegments-2)*refSegSize {
			return
		}
		var oldest [numRegions]*refSeg
		for _, s := range m.segs {
			if oldest[s.region] == nil {
				oldest[s.region] = s
			}
		}
		scanned := false
		for r, s := range oldest {
			if s != nil && !s.open && s.id > m.scanned[r] {
				m.scan(s)
				scanned = true
				break // the scan may have evicted and rotated: look again
			}
		}
		if !scanned {
			return
		}
	}
}

// scan copies the records of s that were hit and are worth it (reinserter.worthCopying).
func (m *refCache) scan(s *refSeg) {
	m.scanned[s.region] = s.id
	all, _ := m.diskBytes()
	perBlob := all / int64(max(len(m.where), 1))
	for _, k := range slices.Clone(s.keys) {
		if !slices.Contains(m.segs, s) {
			return // evicted by a copy's rotation: too late for the rest
		}
		if m.where[k] != s || m.hits[k] == 0 {
			continue
		}
		keep, ok := m.rules.Copy(policy.Candidate{Region: s.region, Bytes: refRecord, Hits: m.hits[k], PerBlob: perBlob})
		if !ok || !m.credit.Covers(refRecord) {
			m.dropped++
			continue
		}
		if s.region == probationRegion {
			m.promoted++
		}
		m.floor = max(m.floor, s.id+1)
		m.place(k, mainRegion, keep)
		m.credit.Spend(refRecord)
		m.copied++
	}
}

// compare fails t where the cache and the model disagree after request step (of key k).
func (m *refCache) compare(t *testing.T, c *Cache, step int, k string) {
	t.Helper()
	st := c.Stats()
	type counts struct{ evictions, copied, promoted, ghostAdmits, dropped uint64 }
	got := counts{st.Evictions, st.Reinserted, st.Promoted, st.GhostAdmits, st.ReinsertDropped}
	want := counts{m.evictions, m.copied, m.promoted, m.ghostAdmits, m.dropped}
	if got != want {
		t.Fatalf("request %d (%s): cache counts %+v, model %+v\n%s", step, k, got, want, m.dump(c))
	}
	if m.regions {
		g := c.keep.Ghost()
		for i := range refKeys {
			key := fmt.Sprintf("k%04d", i)
			h := record.KeyHash([]byte(key))
			if got, want := g.Contains(h), m.rules.Ghost().Contains(h); got != want {
				t.Fatalf("request %d (%s): %s in the ghost set: cache %v, model %v", step, k, key, got, want)
			}
		}
	}
	if n := c.idx.Len(); n != len(m.where) {
		t.Fatalf("request %d (%s): cache holds %d keys, model %d", step, k, n, len(m.where))
	}
	for key, s := range m.where {
		h := record.KeyHash([]byte(key))
		loc, ok := c.idx.Get(h)
		if !ok || loc.Segment != s.id {
			t.Fatalf("request %d (%s): %s in segment %d (held %v), model: segment %d\n%s", step, k, key, loc.Segment, ok, s.id, m.dump(c))
		}
		if hits := c.idx.Hits(h, loc); hits != m.hits[key] {
			t.Fatalf("request %d (%s): %s hit %d times, model %d", step, k, key, hits, m.hits[key])
		}
		if cs := c.segs.table.Load().get(s.id); cs == nil || cs.region != s.region {
			t.Fatalf("request %d (%s): segment %d of %s: cache %v, model region %v", step, k, s.id, key, cs, s.region)
		}
	}
}

// dump lists the segments of the cache and of the model, for a failure's message.
func (m *refCache) dump(c *Cache) string {
	var b strings.Builder
	b.WriteString("cache:")
	for _, s := range c.segs.table.Load().list {
		if s != nil {
			fmt.Fprintf(&b, " %d%s(%d", s.id, "mp"[s.region:s.region+1], s.disk.Load())
			if s.open.Load() {
				fmt.Fprintf(&b, " active, %d placed", s.active.SealedSize())
			}
			b.WriteString(")")
		}
	}
	b.WriteString("\nmodel:")
	for _, s := range m.segs {
		fmt.Fprintf(&b, " %d%s(%d, %d records)", s.id, "mp"[s.region:s.region+1], s.disk(), len(s.keys))
	}
	for _, s := range m.segs[max(len(m.segs)-3, 0):] {
		fmt.Fprintf(&b, "\nmodel segment %d:", s.id)
		for _, k := range s.keys {
			loc, _ := c.idx.Get(record.KeyHash([]byte(k)))
			fmt.Fprintf(&b, " %s (cache: %d)", k, loc.Segment)
		}
	}
	return b.String()
}
