package metrics

import (
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
)

type fakeStats blobcache.Stats

func (f *fakeStats) Stats() blobcache.Stats { return blobcache.Stats(*f) }

func TestExposition(t *testing.T) {
	src := &fakeStats{Hits: 3, Misses: 5, BloomRejects: 4, BloomFalsePositives: 1, Blobs: 7,
		DiskBytes: 4096, Segments: 2, Evictions: 1, CorruptRecord: 2, Flushes: 4, FlushTime: 2 * time.Second}
	m := New(src)
	m.ObserveGet(time.Millisecond, true)
	m.ObservePut(time.Millisecond)
	m.Request("http", "get", "200", time.Millisecond)
	m.ConnOpened("memcache")
	m.ConnRejected("http")
	m.Busy("http")
	m.InflightBytes(100)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	out := string(body)
	for _, want := range []string{
		"blobcache_hits_total 3",
		"blobcache_misses_total 5",
		"blobcache_bloom_rejections_total 4",
		"blobcache_bloom_false_positives_total 1",
		"blobcache_blobs 7",
		"blobcache_disk_bytes 4096",
		"blobcache_segments 2",
		"blobcache_evictions_total 1",
		"blobcache_corrupt_records_total 2",
		"blobcache_flush_seconds_total 2",
		`blobcache_get_duration_seconds_count{result="hit"} 1`,
		"blobcache_put_duration_seconds_count 1",
		`blobcache_requests_total{op="get",proto="http",result="200"} 1`,
		`blobcache_connections{proto="memcache"} 1`,
		`blobcache_connections_rejected_total{proto="http"} 1`,
		`blobcache_busy_rejections_total{proto="http"} 1`,
		"blobcache_inflight_value_bytes 100",
		"go_goroutines",
	} {
		if !strings.Contains(out, want+"\n") && !strings.Contains(out, want+" ") && !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveGet(time.Millisecond, false)
	m.ObservePut(time.Millisecond)
	m.Request("http", "get", "200", time.Millisecond)
	m.ConnOpened("http")
	m.ConnClosed("http")
	m.ConnRejected("http")
	m.Busy("http")
	m.InflightBytes(1)
}

// TestDocumentedAtZero: every metric docs/SERVER.md lists is exposed by a server that has not
// served anything yet (except the two whose series come with each new request kind, as the
// document says), and every blobcache_ family it exposes is listed.
func TestDocumentedAtZero(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SERVER.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Metrics\n")
	section, _, _ = strings.Cut(section, "\n## ")
	section, _, _ = strings.Cut(section, "**Scraped as memcached is.**") // then memcached's names
	var names []string
	for _, m := range regexp.MustCompile("`(blobcache)?(_[a-z_]+)").FindAllStringSubmatch(section, -1) {
		names = append(names, "blobcache"+m[2])
	}
	if len(names) < 30 {
		t.Fatalf("found only %d metric names in the Metrics section: %v", len(names), names)
	}
	rec := httptest.NewRecorder()
	New(&fakeStats{}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, name := range names {
		if name == "blobcache_requests_total" || name == "blobcache_request_duration_seconds" {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + name + `(_bucket|_count|_sum)?[{ ]`).MatchString(out) {
			t.Errorf("%s is documented but not exposed at the start", name)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (blobcache_\S+)`).FindAllStringSubmatch(out, -1) {
		if !slices.Contains(names, m[1]) {
			t.Errorf("%s is exposed but not in SERVER.md's Metrics section", m[1])
		}
	}
}
