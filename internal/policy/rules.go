package policy

import (
	"fmt"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/ghost"
)

// Region is one of the logs segments form. Without probation every segment is in Main.
type Region uint8

const (
	// Main is the log of blobs that proved themselves (and, with one log, of every blob).
	Main Region = iota
	// Probation is the log new keys go to under probation.
	Probation
	// Regions is the number of regions.
	Regions
)

// Kind is an eviction policy.
type Kind int

const (
	// KindProbation is S3-FIFO on flash (probation rules).
	KindProbation Kind = iota
	// KindReinsert is one log with reinsertion of records hit since they were written.
	KindReinsert
	// KindFIFO is one log, evicted whole, read back never.
	KindFIFO
)

// Config is what the rules are made for.
type Config struct {
	Kind Kind
	// MaxSize is the disk bound, SegmentSize a segment's size: the rules need MaxSize to hold
	// MinProbationSegments segments for two logs, and a MaxSize to evict anything at all.
	MaxSize, SegmentSize int64
	// MaxCopy is the largest record a copy may be (the write buffer's size).
	MaxCopy int64
}

// MinProbationSegments is the fewest segments MaxSize must hold for probation to run two logs:
// with fewer, the two active segments would be most of the cache, and the rules are reinsertion's.
const MinProbationSegments = 4

// ProbationShare is the share of MaxSize probation keeps once main is full. S3-FIFO's small queue
// is a tenth of the cache; with segments a twentieth missed less on the hit-ratio benchmark
// (docs/BENCHMARKS.md, "what is worth copying").
const ProbationShare = 0.05

// Write is what Route is told of a write: its key's hash, where the key's newest record is (in a
// write buffer or the index, in a live segment), and whether it is a copy or a tombstone that must
// go to main.
type Write struct {
	Hash      uint64
	HasNewest bool
	Newest    Region
	ToMain    bool
}

// Segment is what Victim is told of the oldest live segment of a log.
type Segment struct {
	ID   uint32
	Live bool // false: the log has no segment
	Open bool // it is its log's active segment
}

// Logs is what Victim decides from: the oldest segment of each log, and the bytes main's
// segments take on disk.
type Logs struct {
	Oldest    [Regions]Segment
	MainBytes int64
}

// Candidate is a record of a segment about to be evicted that was hit since it was written.
type Candidate struct {
	Region Region // its segment's log
	Bytes  int64  // the record's bytes on disk
	Hits   int    // its hit count, at least 1
	// PerBlob is the disk bytes the cache holds per blob (its disk bytes over the blobs in its
	// index).
	PerBlob int64
}

// Rules is an eviction policy: where writes go, what goes first, what is written again.
type Rules interface {
	// Regions is the number of logs writes go to: 1, or 2 under probation.
	Regions() int
	// Route is the log a write goes to; ghost says it goes to main because the ghost remembered
	// its key (the caller then calls Admitted once the record is placed).
	Route(w Write) (r Region, ghost bool)
	// Admitted notes that a write Route sent to main for the ghost was placed: the ghost forgets
	// the key, so that a blob dropped from main unread starts in probation again.
	Admitted(hash uint64)
	// Victim is the log whose oldest segment eviction takes next; false if none may go.
	Victim(l Logs) (Region, bool)
	// Reinserts reports whether the records of a segment about to go are read for copies (and
	// hits counted for them).
	Reinserts() bool
	// Copy decides whether record c is written again before its segment goes, and the hit count
	// the copy keeps.
	Copy(c Candidate) (keep int, ok bool)
	// Remembers reports whether keys dropped unread from log r go to the ghost (Dropped).
	Remembers(r Region) bool
	// Evicting notes that a segment of log r is about to be evicted while the cache holds blobs
	// blobs: the ghost is sized for them first.
	Evicting(r Region, blobs int)
	// Dropped notes that the record of hash was dropped from log r by an eviction.
	Dropped(r Region, hash uint64)
	// Ghost is the ghost set (nil without probation), for statistics and tests.
	Ghost() *ghost.Set
}

// New returns the rules for cfg.
func New(cfg Config) Rules {
	switch {
	case cfg.Kind == KindFIFO || cfg.MaxSize == 0:
		return fifo{}
	case cfg.Kind == KindProbation && cfg.MaxSize >= MinProbationSegments*cfg.SegmentSize:
		p := &probation{reinsert: reinsert{maxCopy: cfg.MaxCopy}, maxSize: cfg.MaxSize}
		p.ghost.Store(ghost.New(MinGhost))
		return p
	default:
		return &reinsert{maxCopy: cfg.MaxCopy}
	}
}

// fifo is one log, evicted oldest first, whole.
type fifo struct{}

func (fifo) Regions() int                 { return 1 }
func (fifo) Route(Write) (Region, bool)   { return Main, false }
func (fifo) Admitted(uint64)              {}
func (fifo) Reinserts() bool              { return false }
func (fifo) Copy(Candidate) (int, bool)   { return 0, false }
func (fifo) Remembers(Region) bool        { return false }
func (fifo) Evicting(Region, int)         {}
func (fifo) Dropped(Region, uint64)       {}
func (fifo) Ghost() *ghost.Set            { return nil }
func (fifo) Victim(l Logs) (Region, bool) { return Main, l.Oldest[Main].Live }

// reinsert is one log whose records hit since written are copied to its head.
type reinsert struct {
	maxCopy int64
	// singles counts the records of main hit once that were considered (Copy); Copy's caller
	// owns it.
	singles uint64
}

// SingleHitCopies out of SingleHitOf records of main hit once are copied; the share was chosen
// on the hit-ratio benchmark (docs/BENCHMARKS.md): all of them wrote more than FIFO on Zipf 0.8,
// half missed more than S3-FIFO does.
const SingleHitCopies, SingleHitOf = 7, 10

func (*reinsert) Regions() int                 { return 1 }
func (*reinsert) Route(Write) (Region, bool)   { return Main, false }
func (*reinsert) Admitted(uint64)              {}
func (*reinsert) Reinserts() bool              { return true }
func (*reinsert) Remembers(Region) bool        { return false }
func (*reinsert) Evicting(Region, int)         {}
func (*reinsert) Dropped(Region, uint64)       {}
func (*reinsert) Ghost() *ghost.Set            { return nil }
func (*reinsert) Victim(l Logs) (Region, bool) { return Main, l.Oldest[Main].Live }

// Copy copies a record of c.Bytes hit c.Hits times when:
//
//   - it fits in a write buffer: a larger one would have to be streamed, and takes the room of
//     many smaller ones;
//   - its hits per byte are at least the cache's blobs per byte (Bytes <= Hits*PerBlob): keeping
//     a blob twice the mean size must earn two hits, as in size-aware policies (GDSF), so that
//     what the cache keeps earns the most hits for its bytes; with blobs of one size every hit
//     record passes;
//   - in main, it was hit twice or more, or it is one of SingleHitCopies of every SingleHitOf
//     hit once, as CacheLib's percentage reinsertion does: a record hit once is the least likely
//     to be hit again, and copying it costs a flash write every time it comes round.
//
// A copy in main keeps its hits less one, as a 2-bit CLOCK does; one promoted out of probation
// starts with none, as in S3-FIFO.
func (p *reinsert) Copy(c Candidate) (keep int, ok bool) {
	if c.Bytes > p.maxCopy || c.Bytes > int64(c.Hits)*c.PerBlob {
		return 0, false
	}
	if c.Region == Main && c.Hits == 1 {
		p.singles++
		if p.singles%SingleHitOf >= SingleHitCopies {
			return 0, false
		}
	}
	if c.Region == Probation {
		return 0, true
	}
	return c.Hits - 1, true
}

// probation is S3-FIFO on flash: new keys go to the probation log, keys with a record in main,
// copies and keys the ghost remembers go to main. Main's segments go as under reinsertion.
type probation struct {
	reinsert
	maxSize int64
	// ghost holds the hashes of keys recently dropped from probation unread; replaced by one
	// of another size as the blobs held change (Evicting).
	ghost atomic.Pointer[ghost.Set]
}

// MinGhost is the fewest key hashes the ghost remembers. It is small because a ghost much larger
// than the blobs the cache holds sends blobs asked for twice in a long while straight to main: a
// floor of 1024 missed more on a cache of a few hundred large blobs (docs/BENCHMARKS.md).
const MinGhost = 64

// GhostPerBlob sizes the ghost: it remembers as many dropped keys as main holds blobs (S3-FIFO's
// ghost holds 90% of the cache's objects).
const GhostPerBlob = 0.9

func (*probation) Regions() int        { return int(Regions) }
func (p *probation) Ghost() *ghost.Set { return p.ghost.Load() }

func (p *probation) Route(w Write) (Region, bool) {
	switch {
	case w.ToMain:
		return Main, false
	case w.HasNewest:
		return w.Newest, false
	case p.ghost.Load().Contains(w.Hash):
		return Main, true
	}
	return Probation, false
}

func (p *probation) Admitted(hash uint64) { p.ghost.Load().Remove(hash) }

// Victim takes the oldest segment of main while main holds more than 1-ProbationShare of
// MaxSize (or probation has only its active segment), and otherwise the oldest of probation;
// never a main segment while an older probation segment is live.
func (p *probation) Victim(l Logs) (Region, bool) {
	pr, m := l.Oldest[Probation], l.Oldest[Main]
	switch {
	case !pr.Live:
		return Main, m.Live
	case !m.Live:
		return Probation, true
	case pr.ID < m.ID:
		return Probation, true
	case float64(l.MainBytes) > (1-ProbationShare)*float64(p.maxSize) || pr.Open:
		return Main, true
	}
	return Probation, true
}

func (p *probation) Remembers(r Region) bool { return r == Probation }

// Evicting replaces the ghost with one sized for the blobs the cache holds before a probation
// segment's keys are dropped, when that is more than twice or less than half what it remembers
// now: what the old one remembered is forgotten, and a few keys go to probation that would have
// gone to main.
func (p *probation) Evicting(r Region, blobs int) {
	if r != Probation {
		return
	}
	want := max(int(float64(blobs)*GhostPerBlob), MinGhost)
	if g := p.ghost.Load(); want > 2*g.Cap() || 2*want < g.Cap() {
		p.ghost.Store(ghost.New(want))
	}
}

func (p *probation) Dropped(r Region, hash uint64) {
	if r == Probation {
		p.ghost.Load().Add(hash)
	}
}

func (k Kind) String() string {
	switch k {
	case KindProbation:
		return "probation"
	case KindReinsert:
		return "reinsert"
	case KindFIFO:
		return "fifo"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}
