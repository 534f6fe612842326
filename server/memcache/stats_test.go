package memcache

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// readStats sends a stats command and returns its STAT lines as a map and the names in order.
func readStats(t *testing.T, c io.ReadWriter, br *bufio.Reader, cmd string) (map[string]string, []string) {
	t.Helper()
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		t.Fatal(err)
	}
	stats := map[string]string{}
	var names []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if line == "END\r\n" {
			return stats, names
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "STAT" || !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("%s: bad line %q", cmd, line)
		}
		if _, dup := stats[f[1]]; dup {
			t.Fatalf("%s: %s twice", cmd, f[1])
		}
		stats[f[1]] = f[2]
		names = append(names, f[1])
	}
}

// TestStats checks that stats reports memcached's standard fields with values that follow the
// commands sent, and answers groups and bad arguments as memcached does.
func TestStats(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	sent := "set a 0 0 1\r\n1\r\nset b 0 0 2\r\n22\r\nset b 0 0 1\r\n2\r\nget a b c\r\ndelete a\r\ndelete a\r\nmg b v\r\n"
	io.WriteString(c, sent)
	want := "STORED\r\nSTORED\r\nSTORED\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n2\r\nEND\r\nDELETED\r\nNOT_FOUND\r\nVA 1\r\n2\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v", got, err)
	}
	e.c.Drain()
	stats, _ := readStats(t, c, br, "stats")
	for name, want := range map[string]string{
		"pid":               strconv.Itoa(os.Getpid()),
		"version":           "test",
		"pointer_size":      strconv.Itoa(strconv.IntSize),
		"curr_connections":  "1",
		"total_connections": "1",
		"cmd_get":           "4",
		"cmd_set":           "3",
		"get_hits":          "3",
		"get_misses":        "1",
		"delete_hits":       "1",
		"delete_misses":     "1",
		"store_too_large":   "0",
		"auth_cmds":         "0",
		"auth_errors":       "0",
		"bytes_read":        strconv.Itoa(len(sent + "stats\r\n")),
		"bytes_written":     strconv.Itoa(len(want)),
		"accepting_conns":   "1",
		"curr_items":        "1",
		"total_items":       "3",
	} {
		if stats[name] != want {
			t.Errorf("%s = %q, want %q", name, stats[name], want)
		}
	}
	for _, name := range []string{"uptime", "time", "rusage_user", "rusage_system", "threads", "idle_kicks", "blobcache_disk_bytes"} {
		if _, ok := stats[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	if now, _ := strconv.ParseInt(stats["time"], 10, 64); now < time.Now().Unix()-5 {
		t.Errorf("time = %s", stats["time"])
	}

	settings, _ := readStats(t, c, br, "stats settings")
	if settings["item_size_max"] != strconv.FormatInt(e.st.MaxValueSize(), 10) || settings["binding_protocol"] != "ascii" {
		t.Errorf("stats settings: %v", settings)
	}
	for _, group := range []string{"items", "slabs", "sizes", "conns"} {
		if s, _ := readStats(t, c, br, "stats "+group); len(s) != 0 {
			t.Errorf("stats %s: %v, want nothing", group, s)
		}
	}
	// memcapable checks that stats takes no noreply.
	io.WriteString(c, "stats noreply\r\nstats bogus\r\n")
	for range 2 {
		if line, err := br.ReadString('\n'); line != "ERROR\r\n" {
			t.Fatalf("got %q, %v", line, err)
		}
	}
}

// TestOracleStats sends the same commands to a real memcached and to blobcache and compares
// the counters of stats that both keep, before and after a "stats reset" (which both answer
// RESET), and checks that a reset zeroes on both the same counters.
func TestOracleStats(t *testing.T) {
	o := newOracle(t)
	sides := []*side{{addr: o.mc}, {addr: o.bc}}
	for _, s := range sides {
		s.connect(t)
		defer s.c.Close()
	}
	// Counters both servers keep, counted the same way for these commands. Not compared:
	// bytes_written (the stats replies differ), total_connections (memcached counts its own),
	// get_expired and expired_unfetched (memcached's crawler may reap first), evictions (none
	// here), rusage, uptime and the gauges.
	counted := []string{"max_connections", "cmd_get", "cmd_set", "cmd_flush", "cmd_touch", "cmd_meta", "get_hits", "get_misses",
		"delete_misses", "delete_hits", "incr_misses", "incr_hits", "decr_misses", "decr_hits",
		"cas_misses", "cas_hits", "cas_badval", "touch_hits", "touch_misses", "store_too_large",
		"auth_cmds", "auth_errors", "bytes_read", "total_items", "curr_items"}
	script := "set a 0 0 1\r\n1\r\nset b 0 0 2\r\n22\r\nadd a 0 0 1\r\nx\r\nreplace c 0 0 1\r\nx\r\n" +
		"get a b c\r\ngets a\r\ndelete b\r\ndelete b\r\nset n 0 0 1\r\n5\r\nincr n 3\r\ndecr n 1\r\nincr none 1\r\ndecr none 1\r\n" +
		"touch a 100\r\ntouch none 100\r\ngat 100 a none\r\ncas a 0 0 1 987654321\r\nz\r\ncas none 0 0 1 1\r\nz\r\n" +
		"mn\r\nmg a v\r\nmg none v\r\nms m 1\r\nm\r\nmd m\r\nmd m\r\nma n\r\nma none\r\nme a\r\n" +
		"append a 0 0 1\r\ny\r\nprepend none 0 0 1\r\ny\r\n"
	// Each round compares what the counters gained: memcached has counted the version command
	// startMemcached sent before the test began.
	round := func(what, cmds string) {
		t.Helper()
		var base, got [2]map[string]string
		for i, s := range sides {
			base[i], _ = readStats(t, s.c, s.br, "stats")
			s.exchange([]byte(cmds), 1000+i, false)
			got[i], _ = readStats(t, s.c, s.br, "stats")
		}
		gained := func(i int, name string) string {
			if name == "max_connections" || name == "curr_items" {
				return got[i][name]
			}
			a, err1 := strconv.ParseInt(got[i][name], 10, 64)
			b, err2 := strconv.ParseInt(base[i][name], 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Sprintf("%q from %q", got[i][name], base[i][name])
			}
			return strconv.FormatInt(a-b, 10)
		}
		for _, name := range counted {
			_, ok1 := got[0][name]
			_, ok2 := got[1][name]
			if mc, bc := gained(0, name), gained(1, name); !ok1 || !ok2 || mc != bc {
				t.Errorf("%s: %s: memcached %s (%v), blobcache %s (%v)", what, name, mc, ok1, bc, ok2)
			}
		}
		for _, name := range []string{"limit_maxbytes", "bytes", "evictions", "reclaimed", "expired_unfetched", "evicted_unfetched", "rejected_connections", "max_connections", "curr_connections", "threads", "hash_bytes", "total_malloced", "get_flushed", "get_expired"} {
			if _, ok := got[1][name]; !ok {
				t.Errorf("%s: blobcache's stats lack %s", what, name)
			}
		}
	}
	round("after the script", script)

	var before, after [2]map[string]string
	for i, s := range sides {
		before[i], _ = readStats(t, s.c, s.br, "stats")
		if got := s.exchange([]byte("stats reset\r\n"), 2000+i, false); got != "RESET\r\n" {
			t.Fatalf("stats reset on %s: %q", s.addr, got)
		}
		after[i], _ = readStats(t, s.c, s.br, "stats")
	}
	zeroed := func(i int, name string) bool { return before[i][name] != "0" && after[i][name] == "0" }
	for name := range after[1] {
		if _, ok := after[0][name]; !ok || name == "bytes_read" || name == "bytes_written" {
			continue // memcached's own field, or counted again by the stats command that follows
		}
		if zeroed(0, name) != zeroed(1, name) {
			t.Errorf("stats reset: %s went %s -> %s on memcached, %s -> %s on blobcache", name, before[0][name], after[0][name], before[1][name], after[1][name])
		}
	}
	round("after the reset and the script again", script)
}

// TestStatsEvictions: stats reports the blobs evictions took as evictions (and how many went
// unread), bytes against limit_maxbytes, and "stats reset" counts them again from zero.
func TestStatsEvictions(t *testing.T) {
	opts := []blobcache.Option{blobcache.WithWriteBufferSize(64 << 10), blobcache.WithSegmentSize(2 << 20),
		blobcache.WithMaxSize(8 << 20), blobcache.WithExpectedBlobs(4096), blobcache.WithPolicy(blobcache.PolicyFIFO)}
	e := newEnvWith(t, Config{}, store.Config{}, opts)
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	value := strings.Repeat("v", 20<<10)
	set := func(from, to int) {
		for i := from; i < to; i++ {
			fmt.Fprintf(c, "set k%d 0 0 %d noreply\r\n%s\r\n", i, len(value), value)
		}
		io.WriteString(c, "mn\r\n") // answered once the sets before it are
		if line, err := br.ReadString('\n'); line != "MN\r\n" {
			t.Fatalf("mn: %q, %v", line, err)
		}
		e.c.Drain()
	}
	set(0, 1000) // 20 MB into 8 MiB
	stats, _ := readStats(t, c, br, "stats")
	st := e.c.Stats()
	if st.EvictedBlobs == 0 || stats["evictions"] != fmt.Sprint(st.EvictedBlobs) || stats["evicted_unfetched"] != fmt.Sprint(st.EvictedUnfetched) ||
		stats["limit_maxbytes"] != fmt.Sprint(8<<20) || stats["bytes"] != fmt.Sprint(st.DataBytes+st.PendingBytes) {
		t.Fatalf("stats %v\nagainst the cache's %+v", stats, st)
	}
	if b, _ := strconv.ParseInt(stats["bytes"], 10, 64); b > 8<<20 {
		t.Fatalf("bytes %d over limit_maxbytes", b)
	}
	io.WriteString(c, "stats reset\r\n")
	if line, err := br.ReadString('\n'); line != "RESET\r\n" {
		t.Fatalf("stats reset: %q, %v", line, err)
	}
	stats, _ = readStats(t, c, br, "stats")
	if stats["evictions"] != "0" || stats["evicted_unfetched"] != "0" || stats["total_items"] != "0" || stats["cmd_set"] != "0" {
		t.Fatalf("after stats reset: %v", stats)
	}
	set(1000, 1200)
	stats, _ = readStats(t, c, br, "stats")
	if now := e.c.Stats().EvictedBlobs; stats["evictions"] != fmt.Sprint(now-st.EvictedBlobs) || now == st.EvictedBlobs || stats["total_items"] != "200" {
		t.Fatalf("after the reset and 200 sets: evictions %s, the cache's %d since; total_items %s", stats["evictions"], now-st.EvictedBlobs, stats["total_items"])
	}
}
