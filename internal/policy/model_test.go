package policy

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The model test: a trace of gets and puts, request by request, through logs of whole segments
// (the cache's mechanics reduced to counting records: a segment holds perSeg records of one
// size, the disk holds maxSegs segments), with every decision asked twice: of the package's Rules
// and of ref, the policy as docs/DESIGN.md and the root's region.go and reinsert.go describe it,
// written plainly. Both must agree on every decision (where a write goes, which segment goes,
// which record is copied and with what count) and on the ghost after every request. The root's
// TestPolicyReference then holds the cache's mechanics to the same trace.

const (
	modelPerSeg  = 4
	modelMaxSegs = 20
	modelRecord  = int64(64 << 10)
	modelSegSize = modelPerSeg * modelRecord
	modelKeys    = 300
)

type modelSeg struct {
	id     uint32
	region Region
	keys   []string
	open   bool
}

// model is the logs, the keys' places and hits, and the two deciders.
type model struct {
	t       *testing.T
	kind    Kind
	rules   Rules
	ref     *ref
	credit  Credit
	segs    []*modelSeg
	active  [Regions]*modelSeg
	where   map[string]*modelSeg
	hits    map[string]int
	floor   uint32
	nextID  uint32
	scanned [Regions]uint32
	placing string

	decisions, evictions, copies, ghostAdmits int
}

func newModel(t *testing.T, k Kind) *model {
	cfg := Config{Kind: k, MaxSize: modelMaxSegs * modelSegSize, SegmentSize: modelSegSize, MaxCopy: modelRecord}
	m := &model{t: t, kind: k, rules: New(cfg), ref: newRef(k), where: map[string]*modelSeg{}, hits: map[string]int{}}
	m.credit = NewCredit(m.rules, 0.8, modelSegSize)
	return m
}

func hashOf(k string) uint64 { return xxhash.Sum64String(k) }

func (m *model) get(k string) bool {
	if m.where[k] == nil {
		return false
	}
	m.hits[k] = min(m.hits[k]+1, 3)
	return true
}

// put writes k, which the cache does not hold.
func (m *model) put(k string) {
	h := hashOf(k)
	w := Write{Hash: h}
	r, ghost := m.rules.Route(w)
	wr, wghost := m.ref.route(w)
	m.agree("route", k, [2]any{r, ghost}, [2]any{wr, wghost})
	m.place(k, r, 0)
	if ghost {
		m.rules.Admitted(h)
		m.ref.ghost.remove(h)
		m.ghostAdmits++
	}
	m.credit.Earn(modelRecord)
}

func (m *model) agree(what, k string, got, want any) {
	m.t.Helper()
	m.decisions++
	if fmt.Sprint(got) != fmt.Sprint(want) {
		m.t.Fatalf("%v: %s of %s: rules %v, reference %v", m.kind, what, k, got, want)
	}
}

func (m *model) place(k string, r Region, hits int) {
	a := m.active[r]
	rotate := a == nil || len(a.keys) == modelPerSeg || r == Main && a.id < m.floor
	if rotate {
		m.placing = k
		m.makeRoom(r)
		m.placing = ""
		if a != nil {
			a.open = false
		}
		m.nextID++
		a = &modelSeg{id: m.nextID, region: r, open: true}
		m.segs = append(m.segs, a)
		m.active[r] = a
	}
	a.keys = append(a.keys, k)
	m.where[k] = a
	m.hits[k] = hits
}

func (m *model) mainBytes() int64 {
	var n int64
	for _, s := range m.segs {
		if s.region == Main {
			n += modelSegSize
		}
	}
	return n
}

// makeRoom evicts until a new segment of region r fits (the disk holds at most maxSegs).
func (m *model) makeRoom(r Region) {
	for len(m.segs) >= modelMaxSegs {
		var logs Logs
		var oldest [Regions]*modelSeg
		for _, s := range m.segs {
			if oldest[s.region] == nil {
				oldest[s.region] = s
				logs.Oldest[s.region] = Segment{ID: s.id, Live: true, Open: s.open}
			}
		}
		logs.MainBytes = m.mainBytes()
		vr, ok := m.rules.Victim(logs)
		wr, wok := m.ref.victim(logs)
		m.agree("victim", m.placing, [2]any{vr, ok}, [2]any{wr, wok})
		if !ok {
			return
		}
		v := oldest[vr]
		if v.open {
			// Sealed at once here (the cache waits for the seal): the next write to its
			// region starts a new segment.
			v.open = false
			m.active[v.region] = nil
		}
		m.evict(v)
	}
}

func (m *model) evict(v *modelSeg) {
	m.rules.Evicting(v.region, len(m.where))
	m.ref.evicting(v.region, len(m.where))
	m.agree("remembers", "", m.rules.Remembers(v.region), v.region == Probation && m.kind == KindProbation)
	for _, k := range v.keys {
		if m.where[k] != v {
			continue
		}
		delete(m.where, k)
		delete(m.hits, k)
		if m.rules.Remembers(v.region) && k != m.placing {
			m.rules.Dropped(v.region, hashOf(k))
			m.ref.ghost.add(hashOf(k))
		}
	}
	m.segs = slices.DeleteFunc(m.segs, func(s *modelSeg) bool { return s == v })
	if m.active[v.region] == v {
		m.active[v.region] = nil
	}
	m.evictions++
}

// settle scans the oldest sealed segment of each region once the disk is within two segments of
// full, as the cache's reinserter does.
func (m *model) settle() {
	if !m.rules.Reinserts() {
		return
	}
	for len(m.segs) > modelMaxSegs-2 {
		var oldest [Regions]*modelSeg
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
				break
			}
		}
		if !scanned {
			return
		}
	}
}

func (m *model) scan(s *modelSeg) {
	m.scanned[s.region] = s.id
	perBlob := int64(len(m.segs)) * modelSegSize / int64(max(len(m.where), 1))
	for _, k := range slices.Clone(s.keys) {
		if !slices.Contains(m.segs, s) {
			return
		}
		if m.where[k] != s || m.hits[k] == 0 {
			continue
		}
		c := Candidate{Region: s.region, Bytes: modelRecord, Hits: m.hits[k], PerBlob: perBlob}
		keep, ok := m.rules.Copy(c)
		wkeep, wok := m.ref.copy(c)
		m.agree("copy", k, [2]any{keep, ok}, [2]any{wkeep, wok})
		if !ok || !m.credit.Covers(modelRecord) {
			continue
		}
		r, _ := m.rules.Route(Write{Hash: hashOf(k), ToMain: true})
		m.agree("route of a copy", k, r, Main)
		m.floor = max(m.floor, s.id+1)
		m.place(k, Main, keep)
		m.credit.Spend(modelRecord)
		m.copies++
	}
}

func (m *model) compareGhost(step int) {
	g := m.rules.Ghost()
	if (g != nil) != (m.ref.ghost != nil) {
		m.t.Fatalf("%v: ghost: rules %v, reference %v", m.kind, g != nil, m.ref.ghost != nil)
	}
	if g == nil {
		return
	}
	for i := range modelKeys {
		h := hashOf(fmt.Sprintf("k%04d", i))
		if got, want := g.Contains(h), m.ref.ghost.contains(h); got != want {
			m.t.Fatalf("%v, request %d: k%04d in the ghost: rules %v, reference %v", m.kind, step, i, got, want)
		}
	}
}

func TestModel(t *testing.T) {
	for _, k := range []Kind{KindFIFO, KindReinsert, KindProbation} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			m := newModel(t, k)
			rng := rand.New(rand.NewPCG(1, 7))
			zipf := rand.NewZipf(rng, 1.1, 1, modelKeys-1)
			hits := 0
			for step := range 20000 {
				key := fmt.Sprintf("k%04d", zipf.Uint64())
				if m.get(key) {
					hits++
				} else {
					m.put(key)
				}
				m.settle()
				m.compareGhost(step)
			}
			t.Logf("%v: %d hits of 20000; %d decisions agreed; %d evictions, %d copies, %d ghost admissions",
				k, hits, m.decisions, m.evictions, m.copies, m.ghostAdmits)
			if m.evictions == 0 || k != KindFIFO && m.copies == 0 || k == KindProbation && m.ghostAdmits == 0 {
				t.Fatalf("the trace did not exercise the policy: %d evictions, %d copies, %d ghost admissions", m.evictions, m.copies, m.ghostAdmits)
			}
		})
	}
}

// ref is the policy as documented, written plainly: what the rules must decide.
type ref struct {
	kind    Kind
	ghost   *refGhost
	singles int
}

func newRef(k Kind) *ref {
	r := &ref{kind: k}
	if k == KindProbation {
		r.ghost = newRefGhost(64)
	}
	return r
}

// route: one log puts everything in main; probation sends copies and keys with a record to
// main or their record's log, keys the ghost remembers to main, the rest to probation.
func (r *ref) route(w Write) (Region, bool) {
	switch {
	case r.kind != KindProbation || w.ToMain:
		return Main, false
	case w.HasNewest:
		return w.Newest, false
	case r.ghost.contains(w.Hash):
		return Main, true
	}
	return Probation, false
}

// victim: the oldest segment; under probation the oldest of probation unless main holds more
// than 95% of MaxSize or probation has only its active segment, and never main before an older
// probation segment.
func (r *ref) victim(l Logs) (Region, bool) {
	p, mn := l.Oldest[Probation], l.Oldest[Main]
	if r.kind != KindProbation || !p.Live {
		return Main, mn.Live
	}
	if !mn.Live || p.ID < mn.ID {
		return Probation, true
	}
	if float64(l.MainBytes) > 0.95*float64(modelMaxSegs*modelSegSize) || p.Open {
		return Main, true
	}
	return Probation, true
}

// copy: nothing under FIFO; a record no larger than a write buffer whose hits per byte are at
// least the cache's blobs per byte; of main's records hit once, 7 in 10; main keeps hits-1,
// probation's copies start at 0.
func (r *ref) copy(c Candidate) (int, bool) {
	if r.kind == KindFIFO {
		return 0, false
	}
	if c.Bytes > modelRecord || c.Bytes > int64(c.Hits)*c.PerBlob {
		return 0, false
	}
	if c.Region == Main && c.Hits == 1 {
		r.singles++
		if r.singles%10 >= 7 {
			return 0, false
		}
	}
	if c.Region == Probation {
		return 0, true
	}
	return c.Hits - 1, true
}

// evicting: before a probation segment's keys go, the ghost is made anew, empty, for 0.9 keys a
// blob held (at least 64) if that is more than twice or less than half what it holds.
func (r *ref) evicting(reg Region, blobs int) {
	if r.ghost == nil || reg != Probation {
		return
	}
	want := max(int(float64(blobs)*0.9), 64)
	if c := len(r.ghost.buckets) * 7; want > 2*c || 2*want < c {
		r.ghost = newRefGhost(want)
	}
}

// refGhost is the ghost set as internal/ghost documents it: buckets of seven fingerprints, the
// bucket from the hash's high half, each bucket a ring that overwrites its oldest slot.
type refGhost struct{ buckets []refBucket }

type refBucket struct {
	adds  uint32
	slots [7]uint32 // 0: empty
}

func newRefGhost(n int) *refGhost { return &refGhost{buckets: make([]refBucket, max((n+6)/7, 1))} }

func (g *refGhost) slot(h uint64) (*refBucket, uint32) {
	i, _ := bits.Mul64(h&^0xffffffff, uint64(len(g.buckets)))
	return &g.buckets[i], uint32(h) | 1
}

func (g *refGhost) add(h uint64) {
	b, fp := g.slot(h)
	if slices.Contains(b.slots[:], fp) {
		return
	}
	b.adds++
	b.slots[b.adds%7] = fp
}

func (g *refGhost) contains(h uint64) bool {
	b, fp := g.slot(h)
	return slices.Contains(b.slots[:], fp)
}

func (g *refGhost) remove(h uint64) {
	b, fp := g.slot(h)
	if i := slices.Index(b.slots[:], fp); i >= 0 {
		b.slots[i] = 0
	}
}
