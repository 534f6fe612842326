package policy

import (
	"testing"
	"time"
)

func TestNewChoosesTheRules(t *testing.T) {
	const seg = 1 << 20
	for _, tt := range []struct {
		cfg  Config
		want Kind
	}{
		{Config{Kind: KindProbation, MaxSize: 4 * seg, SegmentSize: seg}, KindProbation},
		{Config{Kind: KindProbation, MaxSize: 4*seg - 1, SegmentSize: seg}, KindReinsert}, // no room for two logs
		{Config{Kind: KindProbation, SegmentSize: seg}, KindFIFO},                         // nothing is evicted
		{Config{Kind: KindReinsert, MaxSize: 2 * seg, SegmentSize: seg}, KindReinsert},
		{Config{Kind: KindFIFO, MaxSize: 100 * seg, SegmentSize: seg}, KindFIFO},
	} {
		r := New(tt.cfg)
		if got := kindOf(r); got != tt.want {
			t.Errorf("New(%+v) = %v, want %v", tt.cfg, got, tt.want)
		}
		if wantRegions := map[Kind]int{KindProbation: 2, KindReinsert: 1, KindFIFO: 1}[tt.want]; r.Regions() != wantRegions {
			t.Errorf("%v: %d regions", tt.want, r.Regions())
		}
		if r.Reinserts() != (tt.want != KindFIFO) || (r.Ghost() != nil) != (tt.want == KindProbation) {
			t.Errorf("%v: reinserts %v, ghost %v", tt.want, r.Reinserts(), r.Ghost() != nil)
		}
	}
}

func TestProbationRoute(t *testing.T) {
	r := New(Config{Kind: KindProbation, MaxSize: 100, SegmentSize: 10})
	const h = 0x1234_5678_9abc_def0
	for _, tt := range []struct {
		w     Write
		want  Region
		ghost bool
	}{
		{Write{Hash: h}, Probation, false},
		{Write{Hash: h, ToMain: true}, Main, false},
		{Write{Hash: h, HasNewest: true, Newest: Probation}, Probation, false},
		{Write{Hash: h, HasNewest: true, Newest: Main}, Main, false},
	} {
		if got, ghost := r.Route(tt.w); got != tt.want || ghost != tt.ghost {
			t.Errorf("Route(%+v) = %v, %v; want %v, %v", tt.w, got, ghost, tt.want, tt.ghost)
		}
	}
	r.Dropped(Main, h) // main's drops are not remembered
	if got, _ := r.Route(Write{Hash: h}); got != Probation {
		t.Fatalf("a key dropped from main goes to %v", got)
	}
	r.Dropped(Probation, h)
	if got, ghost := r.Route(Write{Hash: h}); got != Main || !ghost {
		t.Fatalf("a key dropped from probation goes to %v (ghost %v), want main", got, ghost)
	}
	if got, _ := r.Route(Write{Hash: h, HasNewest: true, Newest: Probation}); got != Probation {
		t.Fatalf("a key with a record in probation goes to %v: its newest record decides", got)
	}
	r.Admitted(h)
	if got, ghost := r.Route(Write{Hash: h}); got != Probation || ghost {
		t.Fatalf("after its admission the key goes to %v (ghost %v), want probation", got, ghost)
	}
	for _, k := range []Kind{KindFIFO, KindReinsert} {
		one := New(Config{Kind: k, MaxSize: 100, SegmentSize: 10})
		one.Dropped(Probation, h)
		if got, ghost := one.Route(Write{Hash: h, HasNewest: true, Newest: Probation}); got != Main || ghost {
			t.Errorf("%v routes to %v", k, got)
		}
	}
}

func TestProbationVictim(t *testing.T) {
	const maxSize = 1000
	r := New(Config{Kind: KindProbation, MaxSize: maxSize, SegmentSize: 100})
	live := func(id uint32) Segment { return Segment{ID: id, Live: true} }
	for _, tt := range []struct {
		name string
		l    Logs
		want Region
		ok   bool
	}{
		{"nothing", Logs{}, Main, false},
		{"main only", Logs{Oldest: [Regions]Segment{Main: live(1)}}, Main, true},
		{"probation only", Logs{Oldest: [Regions]Segment{Probation: live(1)}}, Probation, true},
		{"probation older, main over its share", Logs{Oldest: [Regions]Segment{Main: live(5), Probation: live(3)}, MainBytes: maxSize}, Probation, true},
		{"main over its share", Logs{Oldest: [Regions]Segment{Main: live(3), Probation: live(5)}, MainBytes: 951}, Main, true},
		{"main at its share", Logs{Oldest: [Regions]Segment{Main: live(3), Probation: live(5)}, MainBytes: 950}, Probation, true},
		{"probation has only its active segment", Logs{Oldest: [Regions]Segment{Main: live(3), Probation: {ID: 5, Live: true, Open: true}}}, Main, true},
	} {
		if got, ok := r.Victim(tt.l); got != tt.want || ok != tt.ok {
			t.Errorf("%s: Victim = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCopy(t *testing.T) {
	r := New(Config{Kind: KindProbation, MaxSize: 1000, SegmentSize: 100, MaxCopy: 64})
	for _, tt := range []struct {
		c    Candidate
		keep int
		ok   bool
	}{
		{Candidate{Region: Main, Bytes: 65, Hits: 3, PerBlob: 100}, 0, false},      // larger than a write buffer
		{Candidate{Region: Main, Bytes: 60, Hits: 2, PerBlob: 29}, 0, false},       // too few hits for its bytes
		{Candidate{Region: Main, Bytes: 60, Hits: 2, PerBlob: 30}, 1, true},        // main keeps hits less one
		{Candidate{Region: Main, Bytes: 60, Hits: 3, PerBlob: 30}, 2, true},        //
		{Candidate{Region: Probation, Bytes: 60, Hits: 3, PerBlob: 30}, 0, true},   // a promotion starts at 0
		{Candidate{Region: Probation, Bytes: 60, Hits: 1, PerBlob: 100}, 0, true},  // hit once in probation: promoted
		{Candidate{Region: Probation, Bytes: 65, Hits: 3, PerBlob: 100}, 0, false}, // too large
	} {
		if keep, ok := r.Copy(tt.c); keep != tt.keep || ok != tt.ok {
			t.Errorf("Copy(%+v) = %d, %v; want %d, %v", tt.c, keep, ok, tt.keep, tt.ok)
		}
	}
	copied := 0
	for range 10 * SingleHitOf {
		if _, ok := r.Copy(Candidate{Region: Main, Bytes: 10, Hits: 1, PerBlob: 100}); ok {
			copied++
		}
	}
	if copied != 10*SingleHitCopies {
		t.Fatalf("%d of %d records of main hit once copied, want %d", copied, 10*SingleHitOf, 10*SingleHitCopies)
	}
	if _, ok := New(Config{Kind: KindFIFO, MaxSize: 1000, SegmentSize: 100, MaxCopy: 64}).Copy(Candidate{Region: Main, Bytes: 1, Hits: 3, PerBlob: 100}); ok {
		t.Fatal("FIFO copied a record")
	}
}

func TestGhostResize(t *testing.T) {
	r := New(Config{Kind: KindProbation, MaxSize: 1000, SegmentSize: 100})
	g := r.Ghost()
	r.Evicting(Main, 1<<20) // main's evictions leave the ghost alone
	if r.Ghost() != g {
		t.Fatal("the ghost was resized for an eviction from main")
	}
	r.Evicting(Probation, MinGhost) // within a factor of two: kept
	if r.Ghost() != g {
		t.Fatal("the ghost was resized for the blobs it is sized for")
	}
	r.Evicting(Probation, 10000)
	if got := r.Ghost().Cap(); got < 9000 || got > 2*9000 {
		t.Fatalf("ghost for 10000 blobs holds %d, want about %v of them", got, GhostPerBlob)
	}
}

func TestCredit(t *testing.T) {
	const seg = 1000
	c := NewCredit(New(Config{Kind: KindReinsert, MaxSize: 10 * seg, SegmentSize: seg}), 0.8, seg)
	c.Earn(100)
	if !c.Covers(400) || c.Covers(401) {
		t.Fatal("100 bytes written at a share of 0.8 should cover 400 bytes of copies")
	}
	c.Spend(400)
	if c.Covers(1) {
		t.Fatal("spent credit still covers a byte")
	}
	c.Earn(1 << 20)
	if !c.Covers(seg) || c.Covers(seg+1) {
		t.Fatal("credit is not capped at a segment for one log")
	}
	p := NewCredit(New(Config{Kind: KindProbation, MaxSize: 10 * seg, SegmentSize: seg}), 0.8, seg)
	p.Earn(1 << 20)
	if !p.Covers(2*seg) || p.Covers(2*seg+1) {
		t.Fatal("credit is not capped at a segment a log under probation")
	}
	f := NewCredit(New(Config{Kind: KindFIFO, MaxSize: 10 * seg, SegmentSize: seg}), 0.8, seg)
	f.Earn(1 << 20)
	if f.Covers(1) {
		t.Fatal("FIFO earns credit")
	}
}

func TestBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBudget(1000, func() time.Time { return now }) // 1000 bytes a second, a burst of a second
	if !b.Take(1000, false) {
		t.Fatal("a second's worth refused")
	}
	if b.Take(1, false) {
		t.Fatal("past the burst admitted")
	}
	if !b.Take(500, true) {
		t.Fatal("a forced charge refused")
	}
	now = now.Add(1500 * time.Millisecond) // paid for what was taken
	if !b.Take(1000, false) || b.Take(1, false) {
		t.Fatal("the budget did not refill at its rate")
	}
}

func TestSecondPut(t *testing.T) {
	p := NewSecondPut(100)
	if p.Admit(nil, 42, 1) {
		t.Fatal("first Put admitted")
	}
	if !p.Admit(nil, 42, 1) {
		t.Fatal("second Put declined")
	}
}

func TestPolicyAdmit(t *testing.T) {
	var p Policy
	if p.Filters() || !p.Admit(nil, 1, 1) || !p.AffordsCopy(1<<40) {
		t.Fatal("a policy with no admission and no budget filters")
	}
	now := time.Unix(0, 0)
	p.Budget = NewBudget(100, func() time.Time { return now })
	p.Admission = func(_ []byte, h uint64, _ int64) bool { return h != 7 }
	if !p.Filters() || p.Admit(nil, 7, 1) || !p.Admit(nil, 8, 100) {
		t.Fatal("admission or budget ignored")
	}
	if p.Admit(nil, 8, 1) || p.AffordsCopy(1) {
		t.Fatal("over the budget admitted")
	}
}

// kindOf is the policy rules carry out, told by what they do.
func kindOf(r Rules) Kind {
	switch {
	case r.Regions() == 2:
		return KindProbation
	case r.Reinserts():
		return KindReinsert
	}
	return KindFIFO
}
