// Package batch is the write buffer of the cache: records (header, key, value) encoded back to
// back into one batch that a flush worker writes to a segment with a single vectored write.
//
// A batch is a logical byte stream, the concatenation of its buffers: chunks of the batch's own
// arena (Put copies the value there) and, for UnsafePut, the caller's value slices. Offsets in
// entries are offsets in that stream, which become offsets in the segment once the batch is
// placed at a base offset.
//
// Invariants:
//   - Size() never exceeds the limit given to New, so the memory a batch holds is bounded.
//   - Entries are in append order; for a key appended twice, the later entry wins.
//   - In direct mode the stream is one 4 KiB-aligned buffer, and Seal pads it with a pad record
//     to a multiple of 4 KiB.
//
// Concurrency: Append, Seal and Reset must be serialized by the caller (the cache's writer lock).
// Lookup and CopyValue may run concurrently with Append and with each other; they take the
// batch's read lock, but only after a lock-free filter of the key hashes appended says the batch
// may hold the key (a lookup of a key it does not hold takes no lock). After Seal the batch is
// immutable until Reset.
package batch
