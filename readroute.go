package blobcache

import (
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// The read path: how a hit reaches the bytes of a record in a segment file.
//
// With neither DirectIOReads nor BufferedReads set, each hit picks its route (hitFile):
//
//   - a read under routedReadMin bytes goes through the page cache: its fill costs little CPU
//     against the device latency each later hit would otherwise wait for, and a blob read again
//     is then served from RAM;
//   - a read the page cache holds whole is served from it (one copy, no device I/O);
//   - a read whose pages the page cache held once and dropped under memory pressure goes to
//     the device with O_DIRECT: the data does not fit in RAM, and filling the page cache again
//     would cost several times the CPU of the read and evict something else;
//   - while the data fits in RAM (fillGate.pressured is false: the cache's data is at most
//     fitShare of the memory the kernel could give the page cache, and no read has seen the page
//     cache drop the cache's pages lately), any read goes through the page cache and fills it,
//     so that each byte comes from the device once, as a page-cache engine's would;
//   - under pressure, a read of a record hit before since it was written (its access bit, see
//     Index.Touch) goes through the page cache and fills it, a blob read twice being likely to
//     be read again, as long as filling pays (fillGate): recent fills were followed by enough
//     hits the page cache served;
//   - any other read, a record's first hit under pressure, goes to the device with O_DIRECT.
//
// A read through the page cache brings in its record and no readahead past it (segment files
// are advised random: openReads). What the page cache holds is asked of the kernel
// (vfs.StatPageCache, cachestat(2)) once per read, at no I/O. Where it cannot tell (a kernel before 6.5), the access bit alone decides.
// docs/DESIGN.md, "The read path", has the measurements behind the rules.

// routedReadMin is the smallest read that picks its route; smaller ones go through the page
// cache.
const routedReadMin = 64 << 10

// readRoute is where a hit's bytes come from.
type readRoute uint8

const (
	routePageCache readRoute = iota // the page cache holds them whole
	routeFill                       // through the page cache, filling it
	routeDirect                     // from the device with O_DIRECT
)

// chooseRoute picks the route of a read from what the page cache holds of it (st, or err when
// that cannot be told), whether its record was hit before (asked only when it matters) and
// whether filling pays (g), and notes the route in g.
func chooseRoute(st vfs.PageCacheStat, err error, hitBefore func() bool, g *fillGate) readRoute {
	r := routeDirect
	switch {
	case err == nil && st.Cached >= st.Pages:
		r = routePageCache
	case err == nil && st.Evicted > 0:
		g.evicted.Add(1)
	case err == nil && !g.pressured():
		r = routeFill // the data fits: fill once, read from RAM after
	case hitBefore() && g.open():
		r = routeFill
	}
	g.note(r)
	return r
}

// fillGate tells whether filling the page cache pays. A fill costs several times the CPU of a
// direct read (page allocation and the cache insert, besides the copy) and pays back only
// through later reads the page cache serves whole, each saving a device read. So over the
// recent routed reads the gate counts both, and lets a read fill only while the hits served
// are at least fillPayoff times the fills; otherwise one read in fillProbe still fills, so that
// data turning hot is noticed. With few fills seen it is open. Counts are halved every
// gateWindow routed reads. Races between concurrent reads lose a count now and then, which a
// rate of this kind tolerates.
//
// The gate also tells whether the data fits in RAM. It does not (pressured) while the cache's
// data is more than fitShare of the memory the kernel could give the page cache (unfit, asked
// of the kernel at most once per fitInterval), or while routed reads keep finding pages of
// theirs that the page cache had held and dropped (evicted, counted like the others and halved
// with them). The first rule sees data bigger than RAM before the page cache fills up; the
// second, data that fits by size while something else takes the memory.
type fillGate struct {
	served, fills, evicted atomic.Int64
	reads, probes          atomic.Uint64
	unfit                  atomic.Bool
	avail                  atomic.Int64 // the memory the page cache could have, when last asked
	fitDue                 interval     // when the fit is asked again
}

// interval lets one caller through at most once per period, without a lock: concurrent callers
// race on one compare-and-swap, and the losers go on without the work.
type interval struct{ next atomic.Int64 } // in Unix nanoseconds

// due reports whether the caller is the one to do the work now, period after the last.
func (v *interval) due(now time.Time, period time.Duration) bool {
	next := v.next.Load()
	return now.UnixNano() >= next && v.next.CompareAndSwap(next, now.Add(period).UnixNano())
}

// fitShare is the most of the memory available to the page cache (vfs.MemoryAvailable) the
// cache's data may take and still be filled into it: half, leaving the rest to other files and
// to what the machine's processes may come to need.
const fitShare = 0.5

// fitInterval is how often the fit is asked again: the data and the memory change at the pace
// of writes and of other processes, not of reads.
const fitInterval = time.Second

// dataFits reports whether data bytes fit in avail bytes of memory the page cache could have.
func dataFits(data, avail int64) bool { return float64(data) <= fitShare*float64(avail) }

const (
	fillPayoff   = 2
	fillProbe    = 8
	fillMinCount = 16
	gateWindow   = 4096
)

// open reports whether a read that would fill the page cache may.
func (g *fillGate) open() bool {
	f := g.fills.Load()
	if f < fillMinCount || g.served.Load() >= fillPayoff*f {
		return true
	}
	return g.probes.Add(1)%fillProbe == 0
}

// pressured reports whether the cache's data does not all fit in RAM: too large for the memory
// available, or recent routed reads found pages of their range that the page cache had dropped,
// at least evictedMin of them (a count halved every gateWindow routed reads).
func (g *fillGate) pressured() bool { return g.unfit.Load() || g.evicted.Load() >= evictedMin }

// evictedMin is how many recent routed reads must have found evicted pages for the data to count
// as not fitting: a sixty-fourth of a gate window. Memory taken by others soon shows in many reads;
// a few do on this machine with no memory pressure at all (BENCHMARKS, "The seed's own code in the
// same runs": pages dropped without any reclaim counted), and one of them used to send thousands
// of reads to the device. A read that finds evicted pages goes to the device all the same.
const evictedMin = gateWindow / 64

// refreshFit asks again, at most once per fitInterval, whether data bytes fit in the memory the
// page cache could have. data is called only then. Where the memory cannot be asked, only the
// evicted pages tell.
func (g *fillGate) refreshFit(now time.Time, data func() int64) {
	if !g.fitDue.due(now, fitInterval) {
		return
	}
	avail, err := vfs.MemoryAvailable()
	if err != nil {
		avail = 0 // unknown: nothing is written back (writeback.go)
	}
	g.avail.Store(avail)
	g.unfit.Store(err == nil && !dataFits(data(), avail))
}

// note counts a routed read.
func (g *fillGate) note(r readRoute) {
	switch r {
	case routePageCache:
		g.served.Add(1)
	case routeFill:
		g.fills.Add(1)
	}
	if g.reads.Add(1)%gateWindow == 0 {
		g.served.Store(g.served.Load() / 2)
		g.fills.Store(g.fills.Load() / 2)
		g.evicted.Store(g.evicted.Load() / 2)
	}
}

// routesReads reports whether hits pick their route per read (neither DirectIOReads nor
// BufferedReads, and a file system that takes O_DIRECT).
func (c *Cache) routesReads() bool { return !c.opts.DirectIOReads && !c.opts.BufferedReads }

// hitFile returns what the hit l found reads its n bytes at off (in the segment file) through,
// and counts the route taken.
func (c *Cache) hitFile(l *keyLookup, off, n int64) blobFile {
	s := l.file
	if s.direct == nil || s.rd != blobFile(s.f) || n < routedReadMin {
		return s.rd
	}
	c.fills.refreshFit(time.Now(), c.dataBytes)
	st, err := vfs.StatPageCache(s.f, off, n)
	switch chooseRoute(st, err, func() bool { return l.hits > 0 }, &c.fills) {
	case routePageCache:
		c.stats.readsPageCache.Add(1)
		return s.f
	case routeFill:
		c.stats.readsFilled.Add(1)
		return s.f
	default:
		c.stats.readsDirect.Add(1)
		return s.direct
	}
}

// rangeEnd is the file offset just past the bytes a read of value bytes [off, off+n) (n < 0: to
// the end) of the record l found needs, its header and key included.
func rangeEnd(l *keyLookup, off, n int64) int64 {
	end := l.recOff + int64(l.loc.Length)
	if n >= 0 {
		end = min(end, l.recOff+l.prefixLen()+off+n)
	}
	return end
}

// dataBytes is what the cache's segments hold (Stats.DataBytes).
func (c *Cache) dataBytes() int64 {
	if c.w != nil {
		return c.w.dataBytes()
	}
	return c.diskBytes.Load()
}
