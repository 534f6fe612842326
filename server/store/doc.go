// Package store is the cache as the server's front ends (HTTP, memcached) see it: items with
// memcached flags and expiry (package item), values read from the network into pooled buffers
// under a memory budget, Gets that stream a payload or a range of it to a writer, and latency
// metrics around every cache call.
//
// Memory: a value is held whole between the network and Put, because the library's Put takes a
// slice; a Get holds a copy buffer (the whole blob up to 1 MiB, 256 KiB chunks beyond) while
// its client reads. All of these count against one budget, Config.MaxInflightBytes
// (admission control, FIFO): a request that cannot get its bytes within Config.AdmitTimeout
// fails with ErrBusy, which the front ends answer with 503 or SERVER_ERROR busy (a miss, for a
// memcached get). Puts that block on the cache's own backpressure keep their bytes, so a cache
// that cannot keep up turns into ErrBusy at the front door rather than into unbounded memory.
// Without the budget the bound would be the value limit times the number of concurrent
// requests. Outside it: the cache's write buffers (Options.WriteBufferSize times
// MaxInflightBatches+1), and the library's read buffer of a blob up to 1 MiB for the moment it
// is copied out.
//
// A Store is safe for concurrent use.
package store
