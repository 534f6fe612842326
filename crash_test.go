package blobcache

import "github.com/seed57392e9e/blobcache/internal/batch"

// crash stops the cache the way a killed process would: the open write batch is dropped, the
// active segment is left unsealed, and no bloom filter is saved. Batches already cut still
// finish writing (the kernel would have them in its page cache).
func (c *Cache) crash() {
	c.stopBackground()
	c.closed.Store(true)
	w := c.w
	w.mu.Lock()
	w.closed = true
	w.open = [numRegions]*batch.Batch{}
	c.segs.active = [numRegions]*segHandle{}
	target := w.nextSeq
	w.cond.Broadcast()
	w.mu.Unlock()
	w.waitCommitted(target)
	close(w.stop)
	w.toWrite.close()
	w.workers.Wait()
	w.done.close()
	w.wg.Wait()
	c.segs.sealers.Wait()
	c.closeSegments()
	c.intents.Close() // as the process's exit: the mapping's stores stay in the page cache
	c.lock.Close()
}
