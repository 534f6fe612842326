package blobcache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// churn puts n cold blobs of size bytes, waiting every 16 puts for the batch to be written and
// the reinserter to look at the oldest segment, and calls between() after each wait.
func churn(t *testing.T, c *Cache, prefix string, n, size int, between func()) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("%s%05d", prefix, i)
		if err := c.Put([]byte(k), value(k, 0, size)); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 {
			c.Drain()
			c.rs.wait()
			if between != nil {
				between()
			}
		}
	}
	c.Drain()
	c.rs.wait()
}

// TestReinsertKeepsHotKey: a blob that is read keeps being written again ahead of eviction and
// survives many evictions; one that is never read goes with its segment (FIFO); and the bytes
// reinserted stay within the share.
func TestReinsertKeepsHotKey(t *testing.T) {
	const seg = 2 << 20
	c := open(t, t.TempDir(), small(WithMaxSize(4*seg), WithPolicy(PolicyReinsert))...)
	defer c.Close()
	hot, cold := value("hot", 0, 10<<10), value("cold", 0, 10<<10)
	if err := c.Put([]byte("hot"), hot); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("cold"), cold); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	churn(t, c, "c", 3000, 10<<10, func() { expect(t, c, "hot", hot) })
	st := c.Stats()
	if st.Evictions < 6 {
		t.Fatalf("%d evictions: the test wants the hot blob to outlive several", st.Evictions)
	}
	expect(t, c, "hot", hot)
	expect(t, c, "cold", nil)
	// The hot blob is in the oldest segment once every four evictions (MaxSize holds four).
	if st.Reinserted < 2 {
		t.Fatalf("reinserted %d records over %d evictions", st.Reinserted, st.Evictions)
	}
	// Nothing else was read: only the hot blob was written again, once per eviction at most.
	if st.Reinserted > st.Evictions {
		t.Fatalf("reinserted %d records over %d evictions, only one blob was read", st.Reinserted, st.Evictions)
	}
	t.Logf("evictions %d reinserted %d (%d bytes) dropped %d", st.Evictions, st.Reinserted, st.ReinsertedBytes, st.ReinsertDropped)
}

// TestReinsertShare: with every blob read, reinsertion writes at most its share of the bytes
// (plus the one segment of credit it may save up), and drops the rest.
func TestReinsertShare(t *testing.T) {
	const seg = 2 << 20
	c := open(t, t.TempDir(), small(WithMaxSize(4*seg), WithPolicy(PolicyReinsert), WithReinsertShare(0.2))...)
	defer c.Close()
	var keys []string
	readAll := func() {
		for _, k := range keys[max(0, len(keys)-400):] {
			if r, ok := c.Get([]byte(k)); ok {
				r.Close()
			}
		}
	}
	for i := range 1500 {
		k := fmt.Sprintf("k%05d", i)
		keys = append(keys, k)
		if err := c.Put([]byte(k), value(k, 0, 10<<10)); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 {
			c.Drain()
			readAll()
			c.rs.wait()
		}
	}
	c.Drain()
	st := c.Stats()
	put := int64(1500 * (10<<10 + record.HeaderSize + 6))
	if limit := put/4 + seg; int64(st.ReinsertedBytes) > limit {
		t.Fatalf("reinserted %d bytes for %d put, share 0.2 allows %d", st.ReinsertedBytes, put, limit)
	}
	if st.Reinserted == 0 || st.ReinsertDropped == 0 {
		t.Fatalf("reinserted %d, dropped %d: want both", st.Reinserted, st.ReinsertDropped)
	}
	t.Logf("reinserted %d (%d bytes) dropped %d, %d bytes put", st.Reinserted, st.ReinsertedBytes, st.ReinsertDropped, put)
}

// TestReinsertKeepsMetadata: a reinserted record is the same blob: value, version, expiry,
// flags, attributes and checksum, in a newer segment; and an expired blob is never reinserted.
func TestReinsertKeepsMetadata(t *testing.T) {
	const seg = 2 << 20
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	opts := small(WithMaxSize(4*seg), WithPolicy(PolicyReinsert), WithChecksum(true), WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))
	c := open(t, dir, opts...)
	val := value("meta", 0, 20<<10)
	v, err := c.PutWith([]byte("meta"), val, PutOptions{Expires: now.Add(time.Hour), Flags: 0xfeed, Attrs: "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutWith([]byte("short"), val, PutOptions{Expires: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	before, _ := c.Stat([]byte("meta"))
	h := record.KeyHash([]byte("meta"))
	loc0, _ := c.idx.Get(h)
	expect(t, c, "meta", val)
	expect(t, c, "short", val)
	clock.Add(int64(2 * time.Minute)) // "short" expires, unread since
	churn(t, c, "c", 2000, 10<<10, func() { expect(t, c, "meta", val) })
	if st := c.Stats(); st.Evictions < 3 || st.Reinserted == 0 {
		t.Fatalf("evictions %d reinserted %d", st.Evictions, st.Reinserted)
	}
	loc1, _ := c.idx.Get(h)
	if loc1.Segment <= loc0.Segment {
		t.Fatalf("record still in segment %d (was %d): not reinserted", loc1.Segment, loc0.Segment)
	}
	check := func() {
		t.Helper()
		after, err := c.Stat([]byte("meta"))
		if err != nil {
			t.Fatal(err)
		}
		if after != before || after.Version != v {
			t.Fatalf("reinserted blob's info %+v, written as %+v (version %d)", after, before, v)
		}
		expect(t, c, "meta", val)
		if _, err := c.Stat([]byte("short")); err != ErrNotFound {
			t.Fatalf("expired blob: Stat = %v, want ErrNotFound", err)
		}
	}
	check()
	c.Close()
	c = open(t, dir, opts...) // the copy is what recovery finds
	defer c.Close()
	check()
}

// TestReinsertLosesToNewerWrite drives the writer's side of a reinsertion by hand at the moment
// a Put or Delete of the same key lands between the read of the record and its append: the
// copy must not be taken, and the newer write stays.
func TestReinsertLosesToNewerWrite(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMaxSize(8<<20), WithPolicy(PolicyReinsert))...)
	defer c.Close()
	for i, newer := range []func(k string) error{
		func(k string) error { return c.Put([]byte(k), value(k, 2, 5000)) },                        // in the write buffer
		func(k string) error { err := c.Put([]byte(k), value(k, 2, 5000)); c.Drain(); return err }, // in the index
		func(k string) error { return c.Delete([]byte(k)) },
		func(k string) error { err := c.Delete([]byte(k)); c.Drain(); return err },
	} {
		k := fmt.Sprintf("k%d", i)
		old := value(k, 1, 5000)
		if err := c.Put([]byte(k), old); err != nil {
			t.Fatal(err)
		}
		c.Drain()
		h := record.KeyHash([]byte(k))
		loc, _ := c.idx.Get(h)
		info, _ := c.Stat([]byte(k))
		hdr := record.Header{Kind: record.KindPut, KeyLen: uint32(len(k)), ValueLen: 5000, CTime: info.Created.UnixNano(),
			ValueCRC: record.CRC(old), Version: info.Version}
		if err := newer(k); err != nil {
			t.Fatal(err)
		}
		c.w.mu.Lock()
		c.w.earn(1 << 30) // as much credit as there is room for
		c.w.mu.Unlock()
		if res := c.w.reinsert(h, hdr, []byte(k), old, nil, loc, 0); res != reinsertGone {
			t.Fatalf("case %d: reinsert after a newer write = %d, want refused", i, res)
		}
		c.Drain()
		if i < 2 {
			expect(t, c, k, value(k, 2, 5000))
		} else {
			expect(t, c, k, nil)
		}
	}
}

// TestReinsertRacesWrites runs reinsertion against concurrent Puts and Deletes of the hot keys
// it copies: a Get never returns a value older than the last write that returned before it
// started, nor torn bytes, and after the writers stop every key reads as its last write.
// Under PolicyProbation (four segments run two regions) the copies are promotions too.
func TestReinsertRacesWrites(t *testing.T) {
	for _, p := range []Policy{PolicyReinsert, PolicyProbation} {
		t.Run(p.String(), func(t *testing.T) { testReinsertRacesWrites(t, p) })
	}
}

func testReinsertRacesWrites(t *testing.T, p Policy) {
	const seg = 2 << 20
	c := open(t, t.TempDir(), small(WithMaxSize(4*seg), WithPolicy(p))...)
	defer c.Close()
	const keys = 8
	var last [keys]atomic.Int64 // the version of the last completed write; -1: deleted
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
		stop.Store(true)
	}
	const size = 6000
	// A value says which write it is: its version in the first 8 bytes, then bytes derived
	// from key and version.
	valueOf := func(k string, v int64) []byte {
		b := value(k, int(v), size)
		binary.LittleEndian.PutUint64(b, uint64(v))
		return b
	}
	wg.Add(2)
	go func() { // writer of the hot keys
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 1))
		for v := int64(1); !stop.Load(); v++ {
			// Key i gets 2^i/2^keys of the writes: the first ones live long enough to be
			// reinserted, some while they are written again.
			i := max(bits.Len(uint(r.IntN(1<<keys)))-1, 0)
			k := fmt.Sprintf("hot%d", i)
			if r.IntN(8) == 0 {
				if err := c.Delete([]byte(k)); err != nil {
					fail(err)
				}
				last[i].Store(-v)
			} else {
				if err := c.Put([]byte(k), valueOf(k, v)); err != nil {
					fail(err)
				}
				last[i].Store(v)
			}
			time.Sleep(500 * time.Microsecond)
		}
	}()
	go func() { // reader: sets the access bits, checks what it gets
		defer wg.Done()
		buf := make([]byte, size)
		for !stop.Load() {
			for i := range keys {
				k := fmt.Sprintf("hot%d", i)
				floor := last[i].Load()
				n, err := c.ReadAt([]byte(k), buf, 0)
				if err == ErrNotFound {
					continue // a cache may forget
				}
				if err != nil || n != size {
					fail(fmt.Errorf("ReadAt(%s) = %d, %v", k, n, err))
					return
				}
				v := int64(binary.LittleEndian.Uint64(buf))
				if !bytes.Equal(buf, valueOf(k, v)) {
					fail(fmt.Errorf("ReadAt(%s): torn or foreign bytes", k))
					return
				}
				if v < floor || floor < 0 && v < -floor {
					fail(fmt.Errorf("ReadAt(%s): version %d, older than the write %d that returned before", k, v, floor))
					return
				}
			}
		}
	}()
	churn(t, c, "c", 2500, 10<<10, nil)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.Drain()
	for i := range keys {
		k := fmt.Sprintf("hot%d", i)
		switch v := last[i].Load(); {
		case v < 0:
			expect(t, c, k, nil)
		case v > 0:
			if r, ok := c.Get([]byte(k)); ok {
				got, _ := io.ReadAll(r)
				if !bytes.Equal(got, valueOf(k, v)) {
					t.Fatalf("%s: not its last write (version %d)", k, v)
				}
			}
		}
	}
	st := c.Stats()
	t.Logf("evictions %d reinserted %d dropped %d", st.Evictions, st.Reinserted, st.ReinsertDropped)
}

// declineSwitch declines every Put while on.
type declineSwitch struct{ on atomic.Bool }

func (d *declineSwitch) Admit([]byte, uint64, int64) bool { return !d.on.Load() }

// TestDeclinedPutLeavesNoStaleValue: a declined Put returns nil and the key then misses, whether
// its older blob is in the write buffer or on disk, also after a reopen; and a declined Put of a
// key the cache never held writes nothing.
func TestDeclinedPutLeavesNoStaleValue(t *testing.T) {
	dir := t.TempDir()
	d := new(declineSwitch)
	opts := small(WithAdmission(d))
	c := open(t, dir, opts...)
	put := func(k string, v int) {
		t.Helper()
		if err := c.Put([]byte(k), value(k, v, 3000)); err != nil {
			t.Fatal(err)
		}
	}
	put("buffered", 1)
	put("ondisk", 1)
	put("deleted", 1)
	c.Drain()
	put("buffered", 2) // still in the write buffer when its next Put is declined
	if err := c.Delete([]byte("deleted")); err != nil {
		t.Fatal(err)
	}
	d.on.Store(true)
	before := c.Stats()
	put("buffered", 3)
	put("ondisk", 3)
	put("deleted", 3)
	put("never", 3)
	v, err := c.PutWith([]byte("ondisk"), value("ondisk", 4, 3000), PutOptions{Flags: 7})
	if err != nil || v == 0 {
		t.Fatalf("declined PutWith = %d, %v", v, err)
	}
	if err := c.PutFrom([]byte("streamed"), bytes.NewReader(value("s", 0, 3000)), 3000); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"buffered", "ondisk", "deleted", "never", "streamed"} {
		expect(t, c, k, nil)
	}
	c.Drain()
	st := c.Stats()
	if got := st.Declined - before.Declined; got != 6 {
		t.Fatalf("Declined %d, want 6", got)
	}
	// Tombstones hid buffered and ondisk; no put record was written.
	if got := st.Puts - before.Puts; got != 0 {
		t.Fatalf("%d puts written while declining", got)
	}
	// A conditional write is admitted all the same.
	d2 := value("cond", 0, 100)
	if _, err := c.PutWith([]byte("cond"), d2, PutOptions{If: IfAbsent()}); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "cond", d2)
	c.Close()
	c = open(t, dir, opts...)
	defer c.Close()
	for _, k := range []string{"buffered", "ondisk", "deleted", "never", "streamed"} {
		expect(t, c, k, nil)
	}
	d.on.Store(false)
	put("ondisk", 5)
	expect(t, c, "ondisk", value("ondisk", 5, 3000))
}

func TestAdmitOnSecondPut(t *testing.T) {
	c := open(t, t.TempDir(), small(WithAdmission(AdmitOnSecondPut(1000)))...)
	defer c.Close()
	v := value("k", 0, 1000)
	for i, want := range [][]byte{nil, v, v} {
		if err := c.Put([]byte("k"), v); err != nil {
			t.Fatal(err)
		}
		c.Drain()
		if i == 0 {
			expect(t, c, "k", nil)
		} else {
			expect(t, c, "k", want)
		}
	}
	if st := c.Stats(); st.Declined != 1 {
		t.Fatalf("Declined %d, want 1 (the first Put)", st.Declined)
	}
}

// TestWriteBudget: with a budget of 1 MiB/s and a clock that stands still, a second's worth of
// writes (the burst) is admitted and the rest declined; each second the clock moves on admits
// one more second's worth.
func TestWriteBudget(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	c := open(t, t.TempDir(), small(WithWriteBudget(1<<20), WithClock(func() time.Time { return time.Unix(0, clock.Load()) }))...)
	defer c.Close()
	const size = 16<<10 - record.HeaderSize - 6 // a 16 KiB record
	written := func() int64 { return int64(c.Stats().Puts) * 16 << 10 }
	i := 0
	putN := func(n int) {
		for range n {
			k := fmt.Sprintf("k%05d", i)
			i++
			if err := c.Put([]byte(k), value(k, 0, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	putN(200)
	if w := written(); w != 1<<20 {
		t.Fatalf("%d bytes admitted at one instant, want the 1 MiB burst", w)
	}
	for s := range 10 {
		clock.Add(int64(time.Second))
		putN(200)
		if w, want := written(), int64(s+2)<<20; w != want {
			t.Fatalf("after %d s: %d bytes admitted, want %d", s+1, w, want)
		}
	}
	clock.Add(int64(time.Second / 4))
	putN(200)
	if w, want := written(), int64(11)<<20+1<<18; w != want {
		t.Fatalf("after 10.25 s: %d bytes admitted, want %d", w, want)
	}
	if st := c.Stats(); st.Declined != uint64(i)-st.Puts {
		t.Fatalf("Declined %d, Puts %d of %d", st.Declined, st.Puts, i)
	}
}

func TestPolicyOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opt Option
		ok  bool
	}{
		{WithPolicy(PolicyFIFO), true},
		{WithPolicy(Policy(7)), false},
		{WithReinsertShare(0.3), true},
		{WithReinsertShare(1), false},
		{WithReinsertShare(-0.1), false},
		{WithWriteBudget(1 << 20), true},
		{WithWriteBudget(-1), false},
		{WithAdmission(AdmitAll()), true},
	} {
		var o Options
		tc.opt(&o)
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate = %v", o, err)
		}
	}
}

// TestFIFOSetsNoBits: under PolicyFIFO nothing is reinserted, and with a fixed read route
// (BufferedReads or DirectIOReads) the hit path leaves the access bits alone, as nothing reads
// them; with the default per-read route a hit sets its bit, which the route reads.
func TestFIFOSetsNoBits(t *testing.T) {
	for _, tc := range []struct {
		opt     Option
		wantBit bool
	}{{WithBufferedReads(true), false}, {WithDirectIOReads(true), false}, {WithBufferedReads(false), true}} {
		c := open(t, t.TempDir(), small(WithMaxSize(8<<20), WithPolicy(PolicyFIFO), tc.opt)...)
		if err := c.Put([]byte("k"), value("k", 0, 100)); err != nil {
			t.Fatal(err)
		}
		c.Drain()
		expect(t, c, "k", value("k", 0, 100))
		h := record.KeyHash([]byte("k"))
		loc, _ := c.idx.Get(h)
		if c.rs != nil {
			t.Fatal("PolicyFIFO started a reinserter")
		}
		if got := c.idx.Hits(h, loc) > 0; got != tc.wantBit {
			t.Fatalf("BufferedReads %v, DirectIOReads %v: access bit %v after a hit, want %v",
				c.opts.BufferedReads, c.opts.DirectIOReads, got, tc.wantBit)
		}
		c.Close()
	}
}
