package memcache

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache"
)

// Setting is one line of "stats settings" beyond those the server knows itself: the server's
// owner passes the cache's settings (the disk bound, the policy, TLS) this way.
type Setting struct {
	Name, Value string
}

// counters are the counters of the stats command, under memcached's names. "stats reset" zeroes
// them; conns is a gauge and stays.
type counters struct {
	conns, totalConns                              atomic.Int64
	rejectedConns                                  atomic.Uint64
	cmdGet, cmdSet, cmdMeta, getHits, getMisses    atomic.Uint64
	deleteHits, deleteMisses, totalItems, tooLarge atomic.Uint64
	authCmds, authErrors, idleKicks                atomic.Uint64
	bytesRead, bytesWritten                        atomic.Uint64
	cmdTouch, touchHits, touchMisses, cmdFlush     atomic.Uint64
	incrHits, incrMisses, decrHits, decrMisses     atomic.Uint64
	casHits, casMisses, casBadval                  atomic.Uint64
}

// reset zeroes every counter but the open connections, as memcached's "stats reset" does.
func (c *counters) reset() {
	c.totalConns.Store(0)
	for _, u := range []*atomic.Uint64{
		&c.rejectedConns, &c.cmdGet, &c.cmdSet, &c.cmdMeta, &c.getHits, &c.getMisses,
		&c.deleteHits, &c.deleteMisses, &c.totalItems, &c.tooLarge,
		&c.authCmds, &c.authErrors, &c.idleKicks, &c.bytesRead, &c.bytesWritten,
		&c.cmdTouch, &c.touchHits, &c.touchMisses, &c.cmdFlush,
		&c.incrHits, &c.incrMisses, &c.decrHits, &c.decrMisses,
		&c.casHits, &c.casMisses, &c.casBadval,
	} {
		u.Store(0)
	}
}

// cacheCounters are the counters of the stats command that the cache keeps (blobcache.Stats),
// as they stood at the last "stats reset": the stats command reports what they gained since.
type cacheCounters struct {
	evicted, evictedUnfetched, expiredUnfetched, reclaimed, expired, flushed uint64
}

func cacheCountersOf(st *blobcache.Stats) cacheCounters {
	return cacheCounters{
		evicted:          st.EvictedBlobs,
		evictedUnfetched: st.EvictedUnfetched,
		expiredUnfetched: st.ExpiredUnfetched,
		reclaimed:        st.PunchedRecords,
		expired:          st.Expired,
		flushed:          st.Invalidated,
	}
}

func (a cacheCounters) since(base cacheCounters) cacheCounters {
	return cacheCounters{
		evicted:          a.evicted - base.evicted,
		evictedUnfetched: a.evictedUnfetched - base.evictedUnfetched,
		expiredUnfetched: a.expiredUnfetched - base.expiredUnfetched,
		reclaimed:        a.reclaimed - base.reclaimed,
		expired:          a.expired - base.expired,
		flushed:          a.flushed - base.flushed,
	}
}

// writeStats answers "stats" with memcached's general statistics that have a meaning here
// (docs/SERVER.md lists the others and why they are missing), then blobcache's own; "stats
// settings" with the settings that apply; "stats reset" by zeroing the counters; and the slab,
// item, size and connection groups, empty here (there are no slab classes). Any other argument
// is an ERROR, as in memcached.
func (c *conn) writeStats(args [][]byte) string {
	switch {
	case len(args) == 0:
		c.generalStats()
	case string(args[0]) == "settings" && len(args) == 1:
		c.settingsStats()
	case string(args[0]) == "reset" && len(args) == 1:
		c.s.resetStats()
		c.w.WriteString("RESET\r\n")
		return "ok"
	case len(args) == 1 && (string(args[0]) == "items" || string(args[0]) == "slabs" || string(args[0]) == "sizes" || string(args[0]) == "conns"):
	default:
		c.w.WriteString("ERROR\r\n")
		return "error"
	}
	c.w.WriteString("END\r\n")
	return "ok"
}

// resetStats is "stats reset": the server's counters go to zero, and the cache's are reported
// from what they are now.
func (s *Server) resetStats() {
	st := s.st.Cache().Stats()
	base := cacheCountersOf(&st)
	s.statsBase.Store(&base)
	s.stats.reset()
}

func (c *conn) stat(name string, v any) { fmt.Fprintf(c.w, "STAT %s %v\r\n", name, v) }

func (c *conn) generalStats() {
	s := c.s
	cs := s.st.Cache().Stats()
	cc := cacheCountersOf(&cs).since(*s.statsBase.Load())
	now := time.Now()
	c.stat("pid", os.Getpid())
	c.stat("uptime", int64(now.Sub(s.start).Seconds()))
	c.stat("time", now.Unix())
	c.stat("version", s.cfg.Version)
	c.stat("pointer_size", strconv.IntSize)
	if user, system, ok := rusage(); ok {
		c.stat("rusage_user", seconds(user))
		c.stat("rusage_system", seconds(system))
	}
	if s.cfg.MaxConns > 0 {
		c.stat("max_connections", s.cfg.MaxConns)
	}
	c.stat("curr_connections", s.stats.conns.Load())
	c.stat("total_connections", s.stats.totalConns.Load())
	c.stat("rejected_connections", s.stats.rejectedConns.Load())
	c.stat("cmd_get", s.stats.cmdGet.Load())
	c.stat("cmd_set", s.stats.cmdSet.Load())
	c.stat("cmd_flush", s.stats.cmdFlush.Load())
	c.stat("cmd_touch", s.stats.cmdTouch.Load())
	c.stat("cmd_meta", s.stats.cmdMeta.Load())
	c.stat("get_hits", s.stats.getHits.Load())
	c.stat("get_misses", s.stats.getMisses.Load())
	c.stat("get_expired", cc.expired)
	c.stat("get_flushed", cc.flushed)
	c.stat("delete_misses", s.stats.deleteMisses.Load())
	c.stat("delete_hits", s.stats.deleteHits.Load())
	c.stat("incr_misses", s.stats.incrMisses.Load())
	c.stat("incr_hits", s.stats.incrHits.Load())
	c.stat("decr_misses", s.stats.decrMisses.Load())
	c.stat("decr_hits", s.stats.decrHits.Load())
	c.stat("cas_misses", s.stats.casMisses.Load())
	c.stat("cas_hits", s.stats.casHits.Load())
	c.stat("cas_badval", s.stats.casBadval.Load())
	c.stat("touch_hits", s.stats.touchHits.Load())
	c.stat("touch_misses", s.stats.touchMisses.Load())
	c.stat("store_too_large", s.stats.tooLarge.Load())
	c.stat("store_no_memory", 0) // a write never fails for want of room: eviction makes it
	c.stat("auth_cmds", s.stats.authCmds.Load())
	c.stat("auth_errors", s.stats.authErrors.Load())
	c.stat("idle_kicks", s.stats.idleKicks.Load())
	c.stat("bytes_read", s.stats.bytesRead.Load())
	c.stat("bytes_written", s.stats.bytesWritten.Load())
	c.stat("limit_maxbytes", cs.MaxSize)
	accepting := 1
	if s.closing.Load() {
		accepting = 0
	}
	c.stat("accepting_conns", accepting)
	c.stat("threads", runtime.GOMAXPROCS(0))
	c.stat("hash_bytes", cs.IndexBytes)
	c.stat("total_malloced", cs.MemoryBytes+cs.BufferBytes+cs.ReadBufferBytes)
	c.stat("bytes", cs.DataBytes+cs.PendingBytes)
	c.stat("curr_items", cs.Blobs)
	c.stat("total_items", s.stats.totalItems.Load())
	if cs.HitsCounted {
		c.stat("expired_unfetched", cc.expiredUnfetched)
		c.stat("evicted_unfetched", cc.evictedUnfetched)
		c.stat("evicted_active", cc.evicted-cc.evictedUnfetched)
	}
	c.stat("evictions", cc.evicted)
	c.stat("reclaimed", cc.reclaimed)
	c.stat("blobcache_segments", cs.Segments)
	c.stat("blobcache_disk_bytes", cs.DiskBytes)
	c.stat("blobcache_pending_bytes", cs.PendingBytes)
	c.stat("blobcache_evicted_segments", cs.Evictions)
	c.stat("blobcache_evicted_bytes", cs.EvictedBytes)
	c.stat("blobcache_bloom_rejections", cs.BloomRejects)
	c.stat("blobcache_bloom_false_positives", cs.BloomFalsePositives)
	c.stat("blobcache_corrupt_records", cs.CorruptRecord)
	c.stat("blobcache_memory_limit_bytes", cs.MemoryCapacity)
	c.stat("blobcache_memory_bytes", cs.MemoryBytes)
	c.stat("blobcache_memory_items", cs.MemoryItems)
}

// seconds formats a duration as memcached formats CPU times: seconds and microseconds.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%d.%06d", d/time.Second, d%time.Second/time.Microsecond)
}

func (c *conn) settingsStats() {
	s := c.s
	cs := s.st.Cache().Stats()
	c.stat("maxbytes", cs.MaxSize)
	if s.cfg.MaxConns > 0 {
		c.stat("maxconns", s.cfg.MaxConns)
	}
	a, ok := c.localAddr().(*net.TCPAddr)
	if ok {
		c.stat("tcpport", a.Port)
	}
	c.stat("udpport", 0)
	if ok {
		c.stat("inter", a.IP)
	}
	c.stat("verbosity", s.verbosity.Load())
	c.stat("evictions", "on")
	c.stat("domain_socket", "NULL")
	c.stat("num_threads", runtime.GOMAXPROCS(0))
	c.stat("detail_enabled", "no")
	c.stat("cas_enabled", "yes")
	c.stat("binding_protocol", "ascii")
	c.stat("auth_enabled_sasl", "no")
	c.stat("auth_enabled_ascii", yesNo(s.cfg.Token != ""))
	c.stat("item_size_max", s.st.MaxValueSize())
	c.stat("maxconns_fast", "yes") // a connection past the limit is answered and closed at once
	c.stat("lru_crawler", "no")
	c.stat("flush_enabled", "yes")
	c.stat("dump_enabled", "no")
	c.stat("hash_algorithm", "xxhash64")
	c.stat("lru_maintainer_thread", "no")
	c.stat("idle_timeout", int64(s.cfg.IdleTimeout/time.Second))
	c.stat("track_sizes", "no")
	c.stat("inline_ascii_response", "no")
	c.stat("blobcache_max_line_bytes", s.cfg.MaxLineBytes)
	c.stat("blobcache_read_timeout", int64(s.cfg.ReadTimeout/time.Second))
	c.stat("blobcache_write_timeout", int64(s.cfg.WriteTimeout/time.Second))
	c.stat("blobcache_write_budget", cs.WriteBudget)
	c.stat("blobcache_memory_limit_bytes", cs.MemoryCapacity)
	for _, st := range s.cfg.Settings {
		c.stat(st.Name, st.Value)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
