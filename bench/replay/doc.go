// Package replay measures BlobCache's hit ratio on a trace: it replays the trace as a
// look-aside cache against the library in process (blobcache.New on a temporary directory;
// Get, and on a miss a Put of a value of the request's size) and counts object and byte misses
// and the bytes the cache wrote.
//
// One replay is one goroutine issuing requests in trace order, so that the cache sees exactly
// the sequence a simulator (libCacheSim) sees. Batches are cut only when full (FlushInterval is
// an hour), so where segments begin and end, and so what eviction drops, depends on the trace
// alone and not on timing: a replay is repeatable.
package replay
