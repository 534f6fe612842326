package blobcache

import (
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/batch"
)

// unflushed is the write buffer as reads see it: the batches not yet committed (the open ones
// and those in flight), newest first, so that a read finds a key's newest record even before it
// is in the index (read-your-writes). The writer changes the list under writer.mu, replacing it
// (copy on write); readers load it without a lock and never call into the writer. A batch leaves
// the list only once its records are in the index (or forgotten, if it failed), so a record is
// always in one or the other while it is the key's newest.
type unflushed struct {
	list atomic.Pointer[[]*batch.Batch]
}

func (u *unflushed) init() { u.list.Store(new([]*batch.Batch)) }

// batches is the list, newest first.
func (u *unflushed) batches() []*batch.Batch { return *u.list.Load() }

// add puts b at the head of the list. The caller holds writer.mu.
func (u *unflushed) add(b *batch.Batch) {
	old := u.batches()
	nl := make([]*batch.Batch, 0, len(old)+1)
	nl = append(append(nl, b), old...)
	u.list.Store(&nl)
}

// drop removes b from the list. The caller holds writer.mu.
func (u *unflushed) drop(b *batch.Batch) {
	old := u.batches()
	nl := make([]*batch.Batch, 0, len(old))
	for _, x := range old {
		if x != b {
			nl = append(nl, x)
		}
	}
	u.list.Store(&nl)
}

// lookup finds the newest record of key (hash h) among the batches.
func (u *unflushed) lookup(h uint64, key []byte) (batch.Value, bool) {
	for _, b := range u.batches() {
		if v, ok := b.Lookup(h, key); ok {
			return v, true
		}
	}
	return batch.Value{}, false
}

// lookupValue is lookup with the value, decompressed (valueIn): in a buffer from the read path's
// pools, which the caller gives back (putBuf) once done with v.Value, unless buf is nil; err when
// a compressed value fails to decompress (a bug: the write buffer's bytes are the ones just
// compressed).
func (u *unflushed) lookupValue(h uint64, key []byte) (v batch.Value, buf *[]byte, ok bool, err error) {
	for _, b := range u.batches() {
		if v, buf, ok, err := valueIn(b, h, key); ok {
			return v, buf, true, err
		}
	}
	return batch.Value{}, nil, false, nil
}

// valueIn is batch b's newest record of key (hash h) with a copy of its value: in a buffer from
// getBuf (buf), or, for a compressed value, decompressed into memory of its own (buf nil).
func valueIn(b *batch.Batch, h uint64, key []byte) (v batch.Value, buf *[]byte, ok bool, err error) {
	v, buf, ok = b.LookupInto(h, key, getBuf)
	if ok && v.Codec != 0 {
		v, err = decodePending(v)
		if buf != nil {
			putBuf(buf)
			buf = nil
		}
	}
	return v, buf, ok, err
}

// readValue finds the newest record of key among the batches and copies the bytes [off,
// off+len(p)) of its value into p (see batch.ReadValue).
// A compressed value is decompressed from a copy of its stored bytes (valueIn): if the
// batch let go of the record in between, it is committed, and readValue reports nothing found
// (the caller looks in the index); if a newer record of the key took its place, that one is
// read.
func (u *unflushed) readValue(h uint64, key, p []byte, off int64) (batch.Value, int, bool, error) {
	for _, b := range u.batches() {
		v, n, ok := b.ReadValue(h, key, p, off)
		if !ok {
			continue
		}
		if v.Codec == 0 {
			return v, n, true, nil
		}
		full, buf, ok, err := valueIn(b, h, key)
		if !ok || err != nil {
			return batch.Value{}, 0, ok, err
		}
		if off < int64(len(full.Value)) {
			n = copy(p, full.Value[off:])
		}
		if buf != nil {
			putBuf(buf)
		}
		full.Value = nil
		return full, n, true, nil
	}
	return batch.Value{}, 0, false, nil
}

// hasHash reports whether a batch holds a record of a key with hash h.
func (u *unflushed) hasHash(h uint64) bool {
	for _, b := range u.batches() {
		if b.HasHash(h) {
			return true
		}
	}
	return false
}

// forEachHash calls fn with the key hash of every record in the batches.
func (u *unflushed) forEachHash(fn func(h uint64)) {
	for _, b := range u.batches() {
		b.ForEachHash(fn)
	}
}

// bytes is the memory the records in the batches hold.
func (u *unflushed) bytes() int64 {
	var n int64
	for _, b := range u.batches() {
		n += b.Size()
	}
	return n
}
