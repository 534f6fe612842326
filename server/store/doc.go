// Package store is the cache as the server's front ends (HTTP, memcached) see it: items with
// memcached flags and expiry (package item), values streamed from the network into the cache
// under a memory budget, Gets that stream a payload or a range of it to a writer, and latency
// metrics around every cache call.
//
// Memory: a value streams from its reader into the cache (blobcache.PutFrom): up to
// blobcache.StreamThreshold it is read into a buffer, beyond it goes to disk a 256 KiB chunk at
// a time, so a multi-MB value is never held whole; a Get holds a copy buffer (the whole blob up
// to 1 MiB, 256 KiB chunks beyond) while its client reads, and for a larger blob the library's
// reader buffers too. Each is counted as the library counts it (blobcache.Cache.PutFromMemory,
// blobcache.BufferSize, blobcache.Cache.ReadMemory), so the figures follow the library's. All of
// these count against one budget, Config.MaxInflightBytes (admission control, FIFO): a request
// that cannot get its bytes within Config.AdmitTimeout fails with ErrBusy, which the front ends
// answer with 503 or SERVER_ERROR busy (a miss, for a memcached get). Puts that block on the cache's own backpressure keep their bytes, so a cache
// that cannot keep up turns into ErrBusy at the front door rather than into unbounded memory.
// Without the budget the bound would be the value limit times the number of concurrent
// requests. Outside it: the cache's write buffers (Options.WriteBufferSize times
// MaxInflightBatches+1), and the library's read buffer of a blob up to 1 MiB for the moment it
// is copied out.
//
// A Store is safe for concurrent use.
package store
