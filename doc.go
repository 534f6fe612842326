// Package blobcache is a blob cache on local disk, for values of hundreds of kilobytes to a few
// megabytes on NVMe.
//
// A miss costs a probe of one global bloom filter and no I/O; a hit costs one positioned read
// (the index, in memory, knows where the record is), from the page cache when it holds the blob
// and, for a large blob it does not, with O_DIRECT unless filling the page cache pays
// (Options.BufferedReads). Writes are batched into large append-only
// segment files, written with O_DIRECT by default, so they go at the disk's sequential speed;
// space is reclaimed by evicting whole segments, oldest first, to stay under Options.MaxSize, and
// the records read since they were written are written again instead of evicted
// (Options.Policy; Options.Admission and Options.WriteBudget decide what is written at all).
// Every record is checksummed, and a read never returns torn bytes or another key's. A crash can
// lose what was written since the last Drain; with Options.Fsync, what Drain, Delete or Close
// returned for is on stable storage. WithReadOnly opens a cache without changing it.
//
// Open a cache with New, and use it from any number of goroutines:
//
//	c, err := blobcache.New("/var/cache/blobs", blobcache.WithMaxSize(100<<30))
//	...
//	err = c.Put(key, value)             // visible to Get at once
//	r, ok := c.Get(key)                 // a *Reader: Read, WriteTo, Close
//	n, err := c.ReadAt(key, buf, 0)     // into the caller's buffer, no allocation
//	r, ok = c.Open(key)                 // for a socket: io.Copy(conn, r) sends it from the file
//	err = c.Close()
//
// Records carry metadata: PutWith stores an expiry, client flags and attributes, and returns
// the write's version; preconditions (IfAbsent, IfPresent, IfVersion) make a write atomic
// against other writers of the key; Touch, DeleteIf and InvalidateAll complete the set a
// memcached or HTTP server needs (see cmd/blobcache serve). Stats reports counters and sizes.
//
// The design, the on-disk format byte by byte and the known limits are in docs/DESIGN.md;
// the reliability testing in docs/RELIABILITY.md; measured figures in docs/BENCHMARKS.md.
package blobcache
