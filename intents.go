package blobcache

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/intent"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// Acknowledged writes outlive a process crash as intents (internal/intent). A Put or Delete
// returns as soon as its record is in a write buffer; a crash before the buffer reaches the
// kernel loses the record, and the key's older record, on disk, would be served after the
// restart: an older value for a newer one that was acknowledged. So every record appended
// (writer.intend) leaves its key hash and version in the intent log, a file mapping shared with
// the kernel that outlives the process, and the intent is pending until the record's batch (or
// stream) is committed (writer.intentsDone). At open, each pending intent whose key's record in
// the index is older than the intent's version means that write was lost: the older record is
// forgotten, and durably (a tombstone, as for keys lost to damage). A record of the intent's
// version or newer on disk means the write survived. Versions grow with every write of the
// directory (versions.go), so the comparison is sound; a copy by reinsertion keeps its version
// and a Touch too, and neither is newer than what it copies.

// intentSlots is the size of the intent log's ring for caches with o's write buffers: a slot for
// every 256 bytes they hold (a record is at least 65), within [4096, 1M]. A ring full of pending
// intents makes a write wait for a commit (only records under 256 bytes can fill it).
func intentSlots(o *Options) int {
	if o.intentSlots > 0 {
		return o.intentSlots
	}
	buffers := int64(o.MaxInflightBatches+int(numRegions)) * o.WriteBufferSize
	return int(min(max(buffers/256, 4096), 1<<20))
}

// openIntents opens the cache's intent log and forgets, in the index, the records that pending
// intents show were overwritten or deleted by a write a crash lost; their keys join c.lost, for
// tombstones. A damaged log is noted and made anew. Read-only, the log is read, not opened, and
// the forgetting is in memory only.
func (c *Cache) openIntents() error {
	path := filepath.Join(c.dir, cachedir.IntentsFile)
	var pending []intent.Intent
	if c.opts.ReadOnly {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("blobcache: %w", err)
		}
		if pending, err = intent.Decode(b); err != nil {
			c.noteCorruption(fmt.Errorf("blobcache: %s: %w (its pending writes are not checked)", path, err))
			return nil
		}
	} else {
		l, p, err := intent.Open(path, intentSlots(&c.opts))
		if errors.Is(err, ErrCorrupt) {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("blobcache: %w (its pending writes are not checked)", err))
			if rerr := os.Remove(path); rerr != nil {
				return fmt.Errorf("blobcache: remove a damaged intent log: %w", rerr)
			}
			l, p, err = intent.Open(path, intentSlots(&c.opts))
		}
		if err != nil {
			return fmt.Errorf("blobcache: %w", err)
		}
		c.intents, pending = l, p
	}
	for _, in := range pending {
		c.forgetLost(in)
	}
	return nil
}

// forgetLost forgets the key of in's hash if the record the index holds for it is older than
// in's version: the write in stood for was lost.
func (c *Cache) forgetLost(in intent.Intent) {
	loc, ok := c.idx.Get(in.Hash)
	if !ok {
		return
	}
	s, off := c.layout.acquire(in.Hash, loc)
	if s == nil {
		return
	}
	defer s.unref()
	b := make([]byte, min(int64(record.HeaderSize+record.MaxKeyLen), int64(loc.Length)))
	if _, err := s.rd.ReadAt(b, off); err != nil {
		return // a read error: the record is read again, and checked, when asked for
	}
	hdr, key, err := record.Decode(b) // b holds the header and the key, which is what it checks
	if err != nil || record.KeyHash(key) != in.Hash || hdr.Version >= in.Version {
		return
	}
	c.layout.forgetAtOpen(in.Hash, loc, key)
}

// intend records in the intent log that a record of key hash h and version v was appended to an
// open batch. The caller holds mu and checked intentsFull.
func (w *writer) intend(h, v uint64) {
	if l := w.c.intents; l != nil {
		_, _ = l.Append(intent.Intent{Hash: h, Version: v}) // not full: the caller ruled it out
	}
}

// intendFrom notes that batch b, just opened, holds records whose intents are at the log's next
// position or after: none of them is done until b is committed. The caller holds mu.
func (w *writer) intendFrom(b *batch.Batch) {
	if l := w.c.intents; l != nil {
		w.intentFrom[b] = l.Next()
	}
}

// intendStream records the intent of stream s, a record of key hash h and version v. The caller
// holds mu and checked intentsFull.
func (w *writer) intendStream(s *stream, h, v uint64) {
	if l := w.c.intents; l != nil {
		if p, err := l.Append(intent.Intent{Hash: h, Version: v}); err == nil {
			s.intent, s.hasIntent = p, true
		}
	}
}

// intentsFull reports whether every slot of the intent log holds a pending intent, and counts
// the write that must then wait (intentWaits). The caller holds mu.
func (w *writer) intentsFull() bool {
	if w.c.intents == nil || !w.c.intents.Full() {
		return false
	}
	w.intentWaits++
	return true
}

// intentsDone marks the intents of committed records done: all before the first intent of a
// batch not yet committed or of a stream in progress. The caller holds mu.
func (w *writer) intentsDone() {
	l := w.c.intents
	if l == nil {
		return
	}
	first := l.Next()
	for _, p := range w.intentFrom {
		first = min(first, p)
	}
	for _, s := range w.streams {
		if s.hasIntent {
			first = min(first, s.intent)
		}
	}
	l.Done(first)
}
