// Package bufpool pools the byte buffers that hold request values between the network and the
// cache.
//
// Buffers come in size classes: 4 KiB, then four classes per power of two (2^k·5/4, ·6/4, ·7/4,
// ·8/4), so a buffer wastes at most a quarter of its size. Buffers up to MaxPooled are pooled;
// larger ones are allocated and left to the garbage collector. Safe for concurrent use.
package bufpool
