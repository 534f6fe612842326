package blobcache_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache"
)

func Example() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)

	c, err := blobcache.New(dir, blobcache.WithMaxSize(64<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if err := c.Put([]byte("greeting"), []byte("hello, world")); err != nil {
		log.Fatal(err)
	}
	r, ok := c.Get([]byte("greeting"))
	if !ok {
		log.Fatal("miss")
	}
	defer r.Close()
	v, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", v)

	if _, ok := c.Get([]byte("nothing here")); !ok {
		fmt.Println("miss: answered by the bloom filter, no I/O")
	}
	// Output:
	// hello, world
	// miss: answered by the bloom filter, no I/O
}

// A compare-and-swap: the write happens only if the blob is still the version that was read.
func ExampleCache_PutWith() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir, blobcache.WithMaxSize(64<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	key := []byte("session:42")
	v1, err := c.PutWith(key, []byte("v1"), blobcache.PutOptions{
		If:      blobcache.IfAbsent(),
		Expires: time.Now().Add(time.Hour),
		Flags:   7,
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.PutWith(key, []byte("again"), blobcache.PutOptions{If: blobcache.IfAbsent()})
	fmt.Println("second IfAbsent:", errors.Is(err, blobcache.ErrExists))

	_, err = c.PutWith(key, []byte("v2"), blobcache.PutOptions{If: blobcache.IfVersion(v1)})
	fmt.Println("IfVersion with the version read:", err)
	_, err = c.PutWith(key, []byte("v3"), blobcache.PutOptions{If: blobcache.IfVersion(v1)})
	fmt.Println("IfVersion with a stale version:", errors.Is(err, blobcache.ErrExists))

	info, _ := c.Stat(key)
	fmt.Println("value:", info.Size, "bytes, flags", info.Flags, "(each write sets its own)")
	// Output:
	// second IfAbsent: true
	// IfVersion with the version read: <nil>
	// IfVersion with a stale version: true
	// value: 2 bytes, flags 0 (each write sets its own)
}

// GetMany looks up many keys at once; the filter answers the misses for all of them first.
func ExampleCache_GetMany() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir, blobcache.WithMaxSize(64<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Put([]byte("a"), []byte("apple"))
	c.Put([]byte("c"), []byte("cherry"))

	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	err = c.GetMany(keys, func(i int, r *blobcache.Reader) error {
		v, err := io.ReadAll(r)
		fmt.Printf("%s: %s\n", keys[i], v)
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// a: apple
	// c: cherry
}

// PutFrom streams a value of known size from a reader: a large value is never whole in memory.
func ExampleCache_PutFrom() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	body := strings.NewReader(strings.Repeat("x", 3<<20)) // 3 MiB, say an HTTP request body
	if err := c.PutFrom([]byte("upload"), body, body.Size()); err != nil {
		log.Fatal(err)
	}
	info, err := c.Stat([]byte("upload"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Size)
	// Output:
	// 3145728
}

// ReadAt reads part of a blob into the caller's buffer, with no allocation: the hot path of a
// server that keeps its own buffers.
func ExampleCache_ReadAt() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	c.Put([]byte("alphabet"), []byte("abcdefghijklmnopqrstuvwxyz"))
	buf := make([]byte, 5)
	n, err := c.ReadAt([]byte("alphabet"), buf, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", buf[:n])
	if _, err := c.ReadAt([]byte("nothing"), buf, 0); errors.Is(err, blobcache.ErrNotFound) {
		fmt.Println("miss")
	}
	// Output:
	// klmno
	// miss
}

// GetRange streams a range of a blob, as an HTTP Range request asks.
func ExampleCache_GetRange() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	c.Put([]byte("alphabet"), []byte("abcdefghijklmnopqrstuvwxyz"))
	r, ok := c.GetRange([]byte("alphabet"), 20, 100) // a range past the end is cut at the end
	if !ok {
		log.Fatal("miss")
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%d bytes)\n", b, r.Size())
	// Output:
	// uvwxyz (6 bytes)
}

// Stats are the cache's counters; Drain makes everything put so far part of the segments.
func ExampleCache_Stats() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)
	c, err := blobcache.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for i := range 3 {
		c.Put([]byte(fmt.Sprint("key", i)), []byte("value"))
	}
	c.Get([]byte("key1"))
	c.Get([]byte("key9"))
	c.Drain()
	s := c.Stats()
	fmt.Printf("blobs %d, hits %d, misses %d, pending bytes %d\n", s.Blobs, s.Hits, s.Misses, s.PendingBytes)
	// Output:
	// blobs 3, hits 1, misses 1, pending bytes 0
}

// The README's library example.
func Example_readme() {
	dir, _ := os.MkdirTemp("", "blobcache-example")
	defer os.RemoveAll(dir)

	c, err := blobcache.New(dir,
		blobcache.WithMaxSize(64<<20), // evict whole segments, oldest first, past 64 MiB
		blobcache.WithVerifyOnRead(true))
	if err != nil {
		log.Fatal(err)
	}
	stop, err := c.Start() // background work: bloom filter rebuilds, leftover sweeps
	if err != nil {
		log.Fatal(err)
	}
	defer stop() // stops the background work and closes the cache

	key := []byte("user:42/avatar.png")
	if err := c.Put(key, []byte("...the bytes...")); err != nil { // copies; visible to Get at once
		log.Fatal(err)
	}
	r, ok := c.Get(key) // a miss costs a bloom-filter probe and no I/O
	if ok {
		v, _ := io.ReadAll(r)
		r.Close()
		fmt.Printf("%s\n", v)
	}
	var mine blobcache.Reader  // reused from read to read
	if c.GetInto(&mine, key) { // no allocation once mine has been used
		mine.WriteTo(os.Stdout)
		mine.Close()
		fmt.Println()
	}
	buf := make([]byte, 3)
	if n, err := c.ReadAt(key, buf, 3); err == nil { // into your buffer, no allocation
		fmt.Printf("%s\n", buf[:n])
	}
	if _, err := c.PutWith(key, []byte("new"), blobcache.PutOptions{Expires: c.Now().Add(time.Hour)}); err != nil {
		log.Fatal(err)
	}
	c.Delete(key)
	if err := c.Flush(); err != nil { // everything so far is in a segment (and synced, WithFsync)
		log.Fatal(err)
	}
	// Output:
	// ...the bytes...
	// ...the bytes...
	// the
}
