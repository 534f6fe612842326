// Package bufmem counts the memory of buffers the garbage collector owns, such as those kept in
// a sync.Pool, which drops them without telling: a buffer is counted from when it is made until
// the collector frees it. The count is what the read path's buffers hold (Stats.ReadBufferBytes).
package bufmem
