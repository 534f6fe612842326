package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
)

// BenchmarkGet is the store's share of a memcached get of a 4 KiB value the page cache holds,
// with the server's default check on read: the memory budget, the lookup, the read and the
// copy to the client's writer.
func BenchmarkGet(b *testing.B) {
	c, s := benchStore(b)
	ctx := context.Background()
	payload := randomBytes(1, 4<<10)
	key := []byte("key") // made once, as a server's connection reads its keys into its buffer
	benchPut(b, s, key, payload)
	c.Drain()
	begin := func(Info) (Plan, error) { return Plan{W: io.Discard, N: -1}, nil }
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if found, err := s.Send(ctx, key, begin); !found || err != nil {
			b.Fatalf("Send = %v, %v", found, err)
		}
	}
}

// BenchmarkSendResident is the store's share of a memcached get on an event loop of a 4 KiB
// value the memory tier holds, handed by reference to a writer that holds it (holdingWriter), as
// the loop's reply buffer does, against the library's lookup alone (OpenResidentInto): the
// difference is what the store adds to a hit (the clock for the latency metric and the expiry,
// the memory budget, the decoder and the plan).
func BenchmarkSendResident(b *testing.B) {
	c, s := benchStore(b, blobcache.WithMemorySize(64<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
	key := []byte("key")
	benchPut(b, s, key, randomBytes(1, 4<<10))
	c.Drain()
	b.Run("store", func(b *testing.B) {
		ctx := context.Background()
		w := &holdingWriter{}
		begin := func(Info) (Plan, error) { return Plan{W: w, N: -1}, nil }
		b.ReportAllocs()
		for b.Loop() {
			if found, err := s.SendResident(ctx, key, begin); !found || err != nil || len(w.held) != 1 {
				b.Fatalf("SendResident = %v, %v (%d held)", found, err, len(w.held))
			}
			w.held[0].c.Close()
			w.held = w.held[:0]
		}
	})
	b.Run("library", func(b *testing.B) {
		var r blobcache.Reader
		b.ReportAllocs()
		for b.Loop() {
			if found, resident := c.OpenResidentInto(&r, key); !found || !resident {
				b.Fatalf("OpenResidentInto = %v, %v", found, resident)
			}
			r.Close()
		}
	})
}

// BenchmarkGetSize is a Get of a verified value read from disk, by value size, through the
// copy to the client's writer. Besides time and allocations it reports the memory budget the Get
// holds while it writes (held-B) and the read buffers of the process once the loop is done
// (readbuf-B, Stats.ReadBufferBytes: what the buffer pools hold, as far as they are counted).
func BenchmarkGetSize(b *testing.B) {
	for _, size := range []int{4 << 10, 100 << 10, 1 << 20, 2 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			c, s := benchStore(b)
			ctx := context.Background()
			payload := randomBytes(1, size)
			key := []byte("key")
			benchPut(b, s, key, payload)
			c.Drain()
			var held int64
			begin := func(Info) (Plan, error) {
				held = s.Inflight()
				return Plan{W: io.Discard, N: -1}, nil
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if found, err := s.Get(ctx, key, begin); !found || err != nil {
					b.Fatalf("Get = %v, %v", found, err)
				}
			}
			b.ReportMetric(float64(held), "held-B")
			b.ReportMetric(float64(c.Stats().ReadBufferBytes), "readbuf-B")
		})
	}
}

// BenchmarkGetMixed is a Get of values of mixed sizes, 64 of them spread evenly over the
// logarithm of size from 4 KiB to 1 MiB (a value of each is a page-cache hit), in turn. held-B
// is the mean memory budget a Get holds while it writes; B/op counts the buffers the pools did
// not have ready.
func BenchmarkGetMixed(b *testing.B) {
	c, s := benchStore(b)
	ctx := context.Background()
	const n = 64
	var keys [n][]byte
	var total int64
	for i := range n {
		size := int(math.Round(4096 * math.Pow(256, float64(i)/(n-1))))
		keys[i] = []byte(fmt.Sprint("key", i))
		benchPut(b, s, keys[i], randomBytes(uint64(i), size))
		total += int64(size)
	}
	c.Drain()
	var held, gets int64
	begin := func(Info) (Plan, error) {
		held += s.Inflight()
		gets++
		return Plan{W: io.Discard, N: -1}, nil
	}
	b.SetBytes(total / n)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if found, err := s.Get(ctx, keys[i%n], begin); !found || err != nil {
			b.Fatalf("Get = %v, %v", found, err)
		}
		i++
	}
	b.ReportMetric(float64(held)/float64(gets), "held-B")
}

// benchStore is a store over a new cache that checks values on read, with opts besides, closed
// with b.
func benchStore(b *testing.B, opts ...blobcache.Option) (*blobcache.Cache, *Store) {
	c, err := blobcache.New(b.TempDir(), append([]blobcache.Option{blobcache.WithExpectedBlobs(1000), blobcache.WithVerifyOnRead(true)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	s, err := New(c, Config{})
	if err != nil {
		b.Fatal(err)
	}
	return c, s
}

// benchPut stores payload under key through s.
func benchPut(b *testing.B, s *Store, key, payload []byte) {
	v, err := s.Reserve(context.Background(), int64(len(payload)))
	if err != nil {
		b.Fatal(err)
	}
	defer v.Release()
	if _, err := s.Put(key, v, bytes.NewReader(payload), item.Meta{}, blobcache.Precondition{}); err != nil {
		b.Fatal(err)
	}
}
