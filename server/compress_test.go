package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/seed57392e9e/blobcache"
)

// logText is n bytes of log-like text, as seed 000's service caches: it compresses several-fold.
func logText(seed, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "2026-11-27T02:%02d:%02d.%06dZ INFO request id=%d-%d path=/v1/items/%d status=200 bytes=%d\n",
			i/60%60, i%60, i*7919%1000000, seed, i, i*31%977, i*131%65536)
	}
	return b.Bytes()[:n]
}

// TestCompressedThroughBothFrontEnds: with Cache.Compression, values set through memcached and
// HTTP read back whole and in ranges through both, the sizes reported (VALUE, mg s, HTTP's
// Content-Length) are the values', and the values are stored compressed.
func TestCompressedThroughBothFrontEnds(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.Compression = blobcache.CompressionZstd
	s, _ := start(t, cfg)
	base := "http://" + s.HTTPAddr()
	mc := gomemcache.New(s.MemcacheAddr())
	mc.MaxIdleConns = 1
	mcValue, httpValue := logText(1, 400<<10), logText(2, 300<<10)
	if err := mc.Set(&gomemcache.Item{Key: "mc", Value: mcValue, Flags: 3}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := httpDo(t, "PUT", base+"/v1/blobs/http", httpValue); code != 201 {
		t.Fatalf("PUT: %d", code)
	}
	for _, drained := range []bool{false, true} {
		if drained {
			s.Cache().Drain()
		}
		for key, want := range map[string][]byte{"mc": mcValue, "http": httpValue} {
			it, err := mc.Get(key)
			if err != nil || !bytes.Equal(it.Value, want) {
				t.Fatalf("drained %v: memcached get %s: %v", drained, key, err)
			}
			code, body, hdr := httpDo(t, "GET", base+"/v1/blobs/"+key, nil)
			if code != 200 || !bytes.Equal(body, want) || hdr.Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Fatalf("drained %v: HTTP get %s: %d, %d bytes, %v", drained, key, code, len(body), hdr)
			}
			code, body, _ = httpDo(t, "GET", base+"/v1/blobs/"+key, nil, "Range", "bytes=270000-270099")
			if code != 206 || !bytes.Equal(body, want[270000:270100]) {
				t.Fatalf("drained %v: HTTP range of %s: %d %q", drained, key, code, body)
			}
			if got := metaSize(t, s.MemcacheAddr(), key); got != len(want) {
				t.Fatalf("drained %v: mg %s s: %d, want %d", drained, key, got, len(want))
			}
		}
	}
	st := s.Cache().Stats()
	if st.CompressedPuts != 2 || st.CompressedBytesOut*3 > st.CompressedBytesIn {
		t.Fatalf("%d compressed puts, %d bytes to %d", st.CompressedPuts, st.CompressedBytesIn, st.CompressedBytesOut)
	}
}

// metaSize is the size the meta protocol's mg with the s flag reports for key.
func metaSize(t *testing.T, addr, key string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "mg %s s\r\n", key)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "HD s%d", &n); err != nil {
		t.Fatalf("mg %s s: %q", key, line)
	}
	return n
}
