package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// exporterFamilies are the families the Prometheus memcached_exporter (v0.14.4) reports for
// blobcache serve: every one it builds from memcached's general stats and stats settings whose
// field has a meaning here (docs/SERVER.md lists the others). Its slab, LRU crawler and
// extstore families stay absent, as they do for a memcached without slabs in use, a crawler or
// extstore; so do connections_yielded_total and connections_listener_disabled_total (a
// connection is never yielded, the listener never stops accepting).
var exporterFamilies = []string{
	"memcached_up", "memcached_version", "memcached_uptime_seconds", "memcached_time_seconds",
	"memcached_process_user_cpu_seconds_total", "memcached_process_system_cpu_seconds_total",
	"memcached_commands_total", "memcached_read_bytes_total", "memcached_written_bytes_total",
	"memcached_current_connections", "memcached_connections_total", "memcached_connections_rejected_total",
	"memcached_max_connections", "memcached_accepting_connections",
	"memcached_current_bytes", "memcached_limit_bytes", "memcached_current_items", "memcached_items_total",
	"memcached_items_evicted_total", "memcached_items_reclaimed_total",
	"memcached_item_too_large_total", "memcached_item_no_memory_total", "memcached_malloced_bytes",
}

// findExporter returns the memcached_exporter binary: on PATH or in $GOPATH/bin, where
// scripts/test.sh builds it. Missing, the test fails under CI=true and is skipped otherwise.
func findExporter(t *testing.T) string {
	if p, err := exec.LookPath("memcached_exporter"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "memcached_exporter")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := "memcached_exporter is not installed: scripts/test.sh builds it (github.com/prometheus/memcached_exporter v0.14.4, GONOSUMDB=github.com/prometheus/memcached_exporter)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestMemcachedExporter scrapes blobcache serve with the Prometheus memcached_exporter, as
// memcached itself is scraped, after a workload that evicts, punches out overwritten records,
// refuses a connection at the limit, hits and misses: memcached_up is 1, the exporter reports
// exactly exporterFamilies, and each agrees with blobcache's own /metrics (or, where /metrics
// has no counterpart, with what the workload did).
func TestMemcachedExporter(t *testing.T) {
	exporter := findExporter(t)
	exe := buildBinary(t)
	const maxConns = 3
	// Direct writes: the workload must see overwritten records punched out within its seconds,
	// and with write-back a range is punched only once the seal of the segment holding the
	// newer record has synced, which waits for the kernel's write-back (writeback.go).
	srv := startServeProcess(t, exe, nil, t.TempDir(), "--write-buffer-size", "8M", "--segment-size", "16M",
		"--max-size", "96M", "--expected-blobs", "2000", "--max-conns", fmt.Sprint(maxConns), "--flush-interval", "10ms",
		"--direct-writes")
	t.Cleanup(func() {
		srv.cmd.Process.Kill()
		srv.cmd.Wait()
	})

	// The workload, on maxConns connections; one more is refused.
	var conns []net.Conn
	for range maxConns {
		c, err := net.Dial("tcp", srv.mc)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(60 * time.Second))
		conns = append(conns, c)
	}
	if c, err := net.Dial("tcp", srv.mc); err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if line != "SERVER_ERROR too many open connections\r\n" {
			t.Fatalf("a connection past --max-conns got %q", line)
		}
	}
	c, br := conns[0], bufio.NewReader(conns[0])
	expectLine := func(cmd, want string) {
		t.Helper()
		io.WriteString(c, cmd)
		if line, err := br.ReadString('\n'); line != want {
			t.Fatalf("%q: got %q, %v; want %q", cmd, line, err, want)
		}
	}
	blob := strings.Repeat("x", 256<<10)
	// 200 MiB of sets into a 96 MiB bound: three rounds of new keys, a fourth that writes the
	// third round's again (their first records are punched out).
	const keys, sets = 200, 800
	for i := range sets {
		expectLine(fmt.Sprintf("set k%d 0 0 %d\r\n%s\r\n", i%keys+keys*min(i/keys, 2), len(blob), blob), "STORED\r\n")
	}
	hits, misses := 0, 0
	for i := range 3*keys + 20 { // keys of the three rounds, and never written
		io.WriteString(c, fmt.Sprintf("get k%d\r\n", i))
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "VALUE ") {
			hits++
			if _, err := br.Discard(len(blob) + 2); err != nil {
				t.Fatal(err)
			}
			line, _ = br.ReadString('\n')
		} else {
			misses++
		}
		if line != "END\r\n" {
			t.Fatalf("get k%d: %q", i, line)
		}
	}
	expectLine("delete k599\r\n", "DELETED\r\n")
	expectLine("delete nothing\r\n", "NOT_FOUND\r\n")
	for _, c := range conns {
		c.Close()
	}
	if hits == 0 || misses == 0 {
		t.Fatalf("%d hits and %d misses: the workload should have both", hits, misses)
	}

	port := freePort(t)
	ex := exec.Command(exporter, "--memcached.address="+srv.mc, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	var exLog strings.Builder
	ex.Stdout, ex.Stderr = &exLog, &exLog
	if err := ex.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ex.Process.Kill()
		ex.Wait()
	})
	exURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)

	// Compare once nothing moves: the seals, punches and buffer releases after the workload
	// settle within a few flush intervals. m1 and m2 bracket the exporter's scrape.
	var m, e map[string]*dto.MetricFamily
	settled := false
	for try := 0; try < 100 && !settled; try++ {
		time.Sleep(100 * time.Millisecond)
		m1, err := scrape("http://" + srv.http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if e, err = scrape(exURL); err != nil {
			continue // the exporter is still starting
		}
		m2, err := scrape("http://" + srv.http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		settled = true
		for _, name := range []string{"blobcache_data_bytes", "blobcache_pending_bytes", "blobcache_blobs",
			"blobcache_evicted_blobs_total", "blobcache_punched_records_total", "blobcache_memory_bytes",
			"blobcache_write_buffer_bytes", "blobcache_read_buffer_bytes"} {
			settled = settled && value1(m1, name) == value1(m2, name)
		}
		m = m2
	}
	if !settled {
		t.Fatalf("the server's counters never held still for a scrape; exporter log:\n%s", exLog.String())
	}

	var got []string
	for name := range e {
		if strings.HasPrefix(name, "memcached_") && !strings.HasPrefix(name, "memcached_exporter_") {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(exporterFamilies))
	if !slices.Equal(got, want) {
		t.Errorf("the exporter's families:\n got %q\nwant %q", got, want)
	}

	cmd := func(command, status string) float64 {
		return value(e, "memcached_commands_total", map[string]string{"command": command, "status": status})
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"memcached_up", value1(e, "memcached_up"), 1},
		{"memcached_current_bytes", value1(e, "memcached_current_bytes"), value1(m, "blobcache_data_bytes") + value1(m, "blobcache_pending_bytes")},
		{"memcached_limit_bytes", value1(e, "memcached_limit_bytes"), value1(m, "blobcache_max_size_bytes")},
		{"blobcache_max_size_bytes", value1(m, "blobcache_max_size_bytes"), 96 << 20},
		{"memcached_current_items", value1(e, "memcached_current_items"), value1(m, "blobcache_blobs")},
		{"memcached_items_evicted_total", value1(e, "memcached_items_evicted_total"), value1(m, "blobcache_evicted_blobs_total")},
		{"memcached_items_reclaimed_total", value1(e, "memcached_items_reclaimed_total"), value1(m, "blobcache_punched_records_total")},
		{"memcached_items_total", value1(e, "memcached_items_total"), sets},
		// Single-key gets: a request each, counted by its result. (blobcache_hits_total counts
		// every lookup of the cache, a delete's among them.)
		{"get hits", cmd("get", "hit"), value(m, "blobcache_requests_total", map[string]string{"proto": "memcache", "op": "get", "result": "hit"})},
		{"get hits, counted", cmd("get", "hit"), float64(hits)},
		{"get misses", cmd("get", "miss"), value(m, "blobcache_requests_total", map[string]string{"proto": "memcache", "op": "get", "result": "miss"})},
		{"get misses, counted", cmd("get", "miss"), float64(misses)},
		{"set", cmd("set", "hit"), sets},
		{"delete hit", cmd("delete", "hit"), 1},
		{"delete miss", cmd("delete", "miss"), 1},
		{"memcached_connections_rejected_total", value1(e, "memcached_connections_rejected_total"),
			value(m, "blobcache_connections_rejected_total", map[string]string{"proto": "memcache"})},
		{"rejections", value1(e, "memcached_connections_rejected_total"), 1},
		{"memcached_max_connections", value1(e, "memcached_max_connections"), maxConns},
		{"memcached_accepting_connections", value1(e, "memcached_accepting_connections"), 1},
		{"memcached_item_too_large_total", value1(e, "memcached_item_too_large_total"), 0},
		{"memcached_item_no_memory_total", value1(e, "memcached_item_no_memory_total"), 0},
		{"memcached_malloced_bytes", value1(e, "memcached_malloced_bytes"),
			value1(m, "blobcache_memory_bytes") + value1(m, "blobcache_write_buffer_bytes") + value1(m, "blobcache_read_buffer_bytes")},
	} {
		if c.got != c.want {
			t.Errorf("%s: the exporter says %v, want %v", c.what, c.got, c.want)
		}
	}
	if value1(e, "memcached_items_evicted_total") == 0 || value1(e, "memcached_items_reclaimed_total") == 0 {
		t.Errorf("the workload should have evicted and punched out records: evicted %v, reclaimed %v",
			value1(e, "memcached_items_evicted_total"), value1(e, "memcached_items_reclaimed_total"))
	}
	// CPU: the exporter's user and system time (read before m2) is within a tick of the Go
	// collector's total (read after).
	cpu := value1(e, "memcached_process_user_cpu_seconds_total") + value1(e, "memcached_process_system_cpu_seconds_total")
	if total := value1(m, "process_cpu_seconds_total"); cpu <= 0 || cpu > total+0.02 || cpu < total-1 {
		t.Errorf("CPU: the exporter says %v s, the server's process collector %v s", cpu, total)
	}
	if up := value1(e, "memcached_uptime_seconds"); up < 0 || up > 600 {
		t.Errorf("uptime %v s", up)
	}
	if now := float64(time.Now().Unix()); math.Abs(value1(e, "memcached_time_seconds")-now) > 60 {
		t.Errorf("time %v, now %v", value1(e, "memcached_time_seconds"), now)
	}
	if v := e["memcached_version"]; v == nil || !strings.HasPrefix(label(v.GetMetric()[0], "version"), "blobcache-") {
		t.Errorf("memcached_version: %v", v)
	}
	if value1(e, "memcached_read_bytes_total") < sets*float64(len(blob)) || value1(e, "memcached_written_bytes_total") < float64(hits*len(blob)) {
		t.Errorf("bytes read %v, written %v", value1(e, "memcached_read_bytes_total"), value1(e, "memcached_written_bytes_total"))
	}
	if t.Failed() {
		t.Logf("exporter log:\n%s", exLog.String())
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// scrape reads the Prometheus text exposition at url.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value1 is the value of the family's only series (NaN when it is missing).
func value1(fams map[string]*dto.MetricFamily, name string) float64 {
	return value(fams, name, nil)
}

// value is the value of the family's series with the labels given (NaN when there is none).
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return math.NaN()
	}
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range labels {
			ok = ok && label(m, k) == v
		}
		if !ok {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return math.NaN()
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
