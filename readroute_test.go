package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// TestChooseRoute checks each rule of the read path (readroute.go), with and without memory
// pressure, the evicted rule included, which a test cannot provoke on a real page cache without
// memory pressure.
func TestChooseRoute(t *testing.T) {
	unsupported := fmt.Errorf("cachestat: %w", errors.ErrUnsupported)
	for _, tc := range []struct {
		name      string
		pressured bool
		st        vfs.PageCacheStat
		err       error
		hitBefore bool
		want      readRoute
	}{
		{"all cached", true, vfs.PageCacheStat{Pages: 256, Cached: 256}, nil, false, routePageCache},
		{"all cached, hit before", true, vfs.PageCacheStat{Pages: 256, Cached: 256}, nil, true, routePageCache},
		{"first hit", true, vfs.PageCacheStat{Pages: 256}, nil, false, routeDirect},
		{"second hit", true, vfs.PageCacheStat{Pages: 256}, nil, true, routeFill},
		{"second hit, partly cached", true, vfs.PageCacheStat{Pages: 256, Cached: 100}, nil, true, routeFill},
		{"hit before, pages evicted", true, vfs.PageCacheStat{Pages: 256, Cached: 100, Evicted: 1}, nil, true, routeDirect},
		{"first hit, pages evicted", true, vfs.PageCacheStat{Pages: 256, Evicted: 256}, nil, false, routeDirect},
		{"no cachestat, first hit", true, vfs.PageCacheStat{}, unsupported, false, routeDirect},
		{"no cachestat, second hit", true, vfs.PageCacheStat{}, unsupported, true, routeFill},
		// Without pressure the data fits in RAM: a first hit fills the page cache too.
		{"fits, all cached", false, vfs.PageCacheStat{Pages: 256, Cached: 256}, nil, false, routePageCache},
		{"fits, first hit", false, vfs.PageCacheStat{Pages: 256}, nil, false, routeFill},
		{"fits, partly cached", false, vfs.PageCacheStat{Pages: 256, Cached: 100}, nil, false, routeFill},
		{"fits until pages are evicted", false, vfs.PageCacheStat{Pages: 256, Evicted: 1}, nil, false, routeDirect},
		{"fits, no cachestat, first hit", false, vfs.PageCacheStat{}, unsupported, false, routeDirect},
	} {
		var g fillGate
		if tc.pressured {
			g.evicted.Store(evictedMin)
		} else {
			g.evicted.Store(evictedMin - 2) // a few reads found evicted pages: not yet pressure
		}
		asked := false
		got := chooseRoute(tc.st, tc.err, func() bool { asked = true; return tc.hitBefore }, &g)
		if got != tc.want {
			t.Errorf("%s: route %d, want %d", tc.name, got, tc.want)
		}
		if asked && got == routePageCache {
			t.Errorf("%s: asked for the access bit although the page cache held the bytes", tc.name)
		}
		if tc.st.Evicted > 0 && !tc.pressured && g.pressured() {
			t.Errorf("%s: one read that found evicted pages made pressure", tc.name)
		}
	}
	// Pressure comes with evictedMin reads that find evicted pages, and passes after two gate
	// windows of routed reads that find nothing evicted.
	var g fillGate
	evicted := vfs.PageCacheStat{Pages: 256, Evicted: 1}
	for i := range evictedMin {
		if g.pressured() {
			t.Fatalf("pressure after %d reads that found evicted pages, want %d", i, evictedMin)
		}
		if r := chooseRoute(evicted, nil, func() bool { return true }, &g); r != routeDirect {
			t.Fatalf("a read that found evicted pages: route %d", r)
		}
	}
	if !g.pressured() {
		t.Fatalf("no pressure after %d reads that found evicted pages", evictedMin)
	}
	for range 2 * gateWindow {
		g.note(routePageCache)
	}
	if g.pressured() {
		t.Fatal("pressure is remembered after two windows without an eviction")
	}
}

// TestFillGate: the gate stays open while fills are followed by enough page-cache hits, closes
// when they are not (letting one fill in fillProbe through), and opens again when the hits come
// back.
func TestFillGate(t *testing.T) {
	var g fillGate
	// Each blob read three times: direct; then filled if the gate lets it, and served by the
	// page cache on the third read (else read direct, and the third read may fill). At most one
	// hit per fill does not pay.
	fills := 0
	read := func(filled bool) bool {
		if filled {
			g.note(routePageCache)
			return true
		}
		if g.open() {
			g.note(routeFill)
			fills++
			return true
		}
		g.note(routeDirect)
		return false
	}
	for range 400 {
		g.note(routeDirect)
		read(read(false))
	}
	t.Logf("%d fills for 400 blobs read three times", fills)
	if fills > 2*400/fillProbe+fillMinCount*2 {
		t.Fatalf("%d fills of 400 blobs read three times: the gate did not close", fills)
	}
	if fills < 400/fillProbe/2 {
		t.Fatalf("%d fills of 400: the closed gate lets too few probes through", fills)
	}
	// Then a hot set: every fill followed by twenty hits. The gate opens within a window.
	for range 2 * gateWindow / 21 {
		if g.open() {
			g.note(routeFill)
		}
		for range 20 {
			g.note(routePageCache)
		}
	}
	open := 0
	for range 100 {
		if g.open() {
			open++
		}
	}
	if open != 100 {
		t.Fatalf("a hot set: the gate let %d reads of 100 fill", open)
	}
}

// TestReadRoutes follows one large blob through the routes at defaults (direct writes, routes
// per read), on this machine's page cache, under memory pressure (as a read that found pages of
// the cache evicted leaves it): its first hit is read from the device, its second fills the page
// cache, its third is served from it; every read returns the blob's bytes, by Get, ReadAt and
// GetRange. Without pressure a blob's first hit fills the page cache and its second is served
// from it. A small blob never picks a route. With BufferedReads or DirectIOReads nothing is
// counted.
func TestReadRoutes(t *testing.T) {
	// Written with O_DIRECT, so that no page of a blob is in the page cache before its first
	// hit (writeback.go has the other way: TestWriteBackRoute).
	c := open(t, t.TempDir(), WithSegmentSize(64<<20), WithWriteBufferSize(4<<20), WithDirectWrites(true))
	defer c.Close()
	if c.Stats().DirectIOOff != "" {
		t.Skipf("the file system refuses O_DIRECT: %s", c.Stats().DirectIOOff)
	}
	big, small := value("big", 1, 1<<20), value("small", 1, 4<<10)
	for k, v := range map[string][]byte{"big": big, "small": small} {
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	c.fills.evicted.Store(evictedMin) // pressure, for the next few reads (a window halves it)
	routes := func() [3]uint64 {
		s := c.Stats()
		return [3]uint64{s.ReadsPageCache, s.ReadsFilled, s.ReadsDirect}
	}
	readBig := []func() []byte{
		func() []byte { b, _ := getBytes(t, c, "big"); return b },
		func() []byte {
			p := make([]byte, len(big))
			if n, err := c.ReadAt([]byte("big"), p, 0); err != nil || n != len(p) {
				t.Fatalf("ReadAt: %d, %v", n, err)
			}
			return p
		},
		func() []byte {
			r, ok := c.GetRange([]byte("big"), 0, -1)
			if !ok {
				t.Fatal("GetRange: miss")
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	want := [][3]uint64{{0, 0, 1}, {0, 1, 1}, {1, 1, 1}}
	for i, read := range readBig {
		if b := read(); !bytes.Equal(b, big) {
			t.Fatalf("hit %d: wrong bytes", i+1)
		}
		if got := routes(); got != want[i] {
			t.Fatalf("after hit %d: routes (page cache, filled, direct) %v, want %v", i+1, got, want[i])
		}
	}
	for range 3 {
		if b, ok := getBytes(t, c, "small"); !ok || !bytes.Equal(b, small) {
			t.Fatal("small blob: wrong bytes or missing")
		}
	}
	if got := routes(); got != want[2] {
		t.Fatalf("a small blob picked a route: %v", got)
	}
	// Without pressure.
	c.fills.evicted.Store(0)
	if err := c.Put([]byte("big2"), big); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	for i, w := range [][3]uint64{{1, 2, 1}, {2, 2, 1}} {
		if b, ok := getBytes(t, c, "big2"); !ok || !bytes.Equal(b, big) {
			t.Fatal("big2: wrong bytes or missing")
		}
		if got := routes(); got != w {
			t.Fatalf("without pressure, after hit %d: routes (page cache, filled, direct) %v, want %v", i+1, got, w)
		}
	}

	for _, opt := range []Option{WithBufferedReads(true), WithDirectIOReads(true)} {
		dir := t.TempDir()
		c := open(t, dir, opt)
		if err := c.Put([]byte("big"), big); err != nil {
			t.Fatal(err)
		}
		c.Drain()
		for range 3 {
			if b, ok := getBytes(t, c, "big"); !ok || !bytes.Equal(b, big) {
				t.Fatal("wrong bytes or missing")
			}
		}
		if s := c.Stats(); s.ReadsPageCache+s.ReadsFilled+s.ReadsDirect != 0 {
			t.Fatalf("a fixed read path counted routes: %+v", s)
		}
		c.Close()
	}
	if _, err := New(t.TempDir(), WithBufferedReads(true), WithDirectIOReads(true)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("BufferedReads with DirectIOReads: %v, want ErrInvalidOptions", err)
	}
}

// TestReadBufferBytes: the buffer a Reader holds is counted in Stats.ReadBufferBytes while it is
// held.
func TestReadBufferBytes(t *testing.T) {
	c := open(t, t.TempDir(), small()...)
	defer c.Close()
	if err := c.Put([]byte("k"), value("k", 0, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	r, ok := c.Get([]byte("k"))
	if !ok {
		t.Fatal("miss")
	}
	defer r.Close()
	if got := c.Stats().ReadBufferBytes; got < 1<<20 {
		t.Fatalf("ReadBufferBytes %d while a Reader holds a 1 MiB blob's buffer", got)
	}
}

// TestFillGateFit: data at most fitShare of the memory available fits; the gate asks the kernel
// at most once per fitInterval, and data bigger than the machine's memory is pressure at once,
// before any page is evicted.
func TestFillGateFit(t *testing.T) {
	for _, tc := range []struct {
		data, avail int64
		want        bool
	}{
		{4 << 30, 22 << 30, true},
		{11 << 30, 22 << 30, true},
		{12 << 30, 22 << 30, false},
		{33 << 30, 22 << 30, false},
		{0, 0, true},
	} {
		if got := dataFits(tc.data, tc.avail); got != tc.want {
			t.Errorf("dataFits(%d, %d) = %v", tc.data, tc.avail, got)
		}
	}
	if _, err := vfs.MemoryAvailable(); err != nil {
		t.Skipf("no memory figure here: only evicted pages tell (%v)", err)
	}
	var g fillGate
	now := time.Now()
	asked := 0
	huge := func() int64 { asked++; return 1 << 62 }
	small := func() int64 { asked++; return 1 << 20 }
	g.refreshFit(now, huge)
	if !g.pressured() || asked != 1 {
		t.Fatalf("data bigger than any machine's memory: pressured %v (asked %d)", g.pressured(), asked)
	}
	g.refreshFit(now.Add(fitInterval/2), small)
	if !g.pressured() || asked != 1 {
		t.Fatalf("asked again within fitInterval: pressured %v, asked %d", g.pressured(), asked)
	}
	g.refreshFit(now.Add(fitInterval), small)
	if g.pressured() || asked != 2 {
		t.Fatalf("a MiB of data: pressured %v, asked %d", g.pressured(), asked)
	}
}
