package blobcache_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
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
