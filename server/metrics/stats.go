package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed57392e9e/blobcache"
)

// statsCollector turns one blobcache.Stats snapshot per scrape into const metrics.
type statsCollector struct {
	src   StatsSource
	stats []statMetric
}

type statMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*blobcache.Stats) float64
}

func newStatsCollector(src StatsSource) *statsCollector {
	c := &statsCollector{src: src}
	counter := func(name, help string, v func(*blobcache.Stats) float64) {
		c.stats = append(c.stats, statMetric{prometheus.NewDesc(name, help, nil, nil), prometheus.CounterValue, v})
	}
	gauge := func(name, help string, v func(*blobcache.Stats) float64) {
		c.stats = append(c.stats, statMetric{prometheus.NewDesc(name, help, nil, nil), prometheus.GaugeValue, v})
	}
	counter("blobcache_hits_total", "Gets that found their blob.", func(s *blobcache.Stats) float64 { return float64(s.Hits) })
	counter("blobcache_misses_total", "Gets that found nothing, whatever answered them (bloom filter, index or disk).", func(s *blobcache.Stats) float64 { return float64(s.Misses) })
	counter("blobcache_bloom_rejections_total", "Misses answered by the bloom filter alone, without I/O.", func(s *blobcache.Stats) float64 { return float64(s.BloomRejects) })
	counter("blobcache_bloom_false_positives_total", "Misses the bloom filter let through to the index.", func(s *blobcache.Stats) float64 { return float64(s.BloomFalsePositives) })
	counter("blobcache_puts_total", "Blobs stored.", func(s *blobcache.Stats) float64 { return float64(s.Puts) })
	counter("blobcache_deletes_total", "Blobs deleted.", func(s *blobcache.Stats) float64 { return float64(s.Deletes) })
	counter("blobcache_put_waits_total", "Puts that waited for a free write buffer (backpressure).", func(s *blobcache.Stats) float64 { return float64(s.PutWaits) })
	counter("blobcache_flushes_total", "Write batches written to segments.", func(s *blobcache.Stats) float64 { return float64(s.Flushes) })
	counter("blobcache_flushed_bytes_total", "Bytes of write batches written to segments.", func(s *blobcache.Stats) float64 { return float64(s.FlushedBytes) })
	counter("blobcache_flush_seconds_total", "Time flush workers spent writing batches; divided by blobcache_flushes_total it is the mean flush latency.", func(s *blobcache.Stats) float64 { return s.FlushTime.Seconds() })
	counter("blobcache_flush_errors_total", "Batch writes that failed.", func(s *blobcache.Stats) float64 { return float64(s.FlushErrors) })
	counter("blobcache_read_errors_total", "Reads of segment files that failed with an I/O error.", func(s *blobcache.Stats) float64 { return float64(s.ReadErrors) })
	counter("blobcache_evictions_total", "Segments evicted to stay under the size limit.", func(s *blobcache.Stats) float64 { return float64(s.Evictions) })
	counter("blobcache_evicted_bytes_total", "Disk bytes freed by evictions.", func(s *blobcache.Stats) float64 { return float64(s.EvictedBytes) })
	counter("blobcache_evicted_blobs_total", "Blobs evictions took (records the index still pointed to when their segment went).", func(s *blobcache.Stats) float64 { return float64(s.EvictedBlobs) })
	counter("blobcache_evicted_unfetched_total", "Blobs evictions took that no read had hit since they were written (counted while hits are counted).", func(s *blobcache.Stats) float64 { return float64(s.EvictedUnfetched) })
	counter("blobcache_expired_unfetched_total", "Reads that found a blob expired that no read had hit before (counted while hits are counted).", func(s *blobcache.Stats) float64 { return float64(s.ExpiredUnfetched) })
	counter("blobcache_punched_records_total", "Overwritten, deleted and expired records whose blocks were punched out before their segment's eviction.", func(s *blobcache.Stats) float64 { return float64(s.PunchedRecords) })
	counter("blobcache_punched_bytes_total", "Disk bytes returned by punching out overwritten and deleted records.", func(s *blobcache.Stats) float64 { return float64(s.PunchedBytes) })
	counter("blobcache_corrupt_records_total", "Records that failed a check on read or recovery.", func(s *blobcache.Stats) float64 { return float64(s.CorruptRecord) })
	counter("blobcache_torn_tails_total", "Segments whose unfinished tail was cut back on open.", func(s *blobcache.Stats) float64 { return float64(s.TornTails) })
	counter("blobcache_orphans_removed_total", "Leftover files of the cache's own (temporary copies, segments nothing uses) removed.", func(s *blobcache.Stats) float64 { return float64(s.Orphans) })
	counter("blobcache_bloom_rebuilds_total", "Bloom filter rebuilds.", func(s *blobcache.Stats) float64 { return float64(s.BloomRebuilds) })
	counter("blobcache_expired_total", "Reads that found the blob expired (each a miss).", func(s *blobcache.Stats) float64 { return float64(s.Expired) })
	counter("blobcache_invalidated_total", "Reads that found the blob invalidated by a flush_all (each a miss).", func(s *blobcache.Stats) float64 { return float64(s.Invalidated) })
	counter("blobcache_flush_all_total", "flush_all calls (InvalidateAll).", func(s *blobcache.Stats) float64 { return float64(s.Invalidations) })
	counter("blobcache_precondition_failed_total", "Conditional writes refused (add, replace, cas, If-Match...).", func(s *blobcache.Stats) float64 { return float64(s.PreconditionFailed) })
	counter("blobcache_compressed_puts_total", "Puts whose value was stored compressed (--compression).", func(s *blobcache.Stats) float64 { return float64(s.CompressedPuts) })
	counter("blobcache_compressed_in_bytes_total", "Bytes of the values stored compressed, as given.", func(s *blobcache.Stats) float64 { return float64(s.CompressedBytesIn) })
	counter("blobcache_compressed_out_bytes_total", "Bytes of the values stored compressed, as stored.", func(s *blobcache.Stats) float64 { return float64(s.CompressedBytesOut) })
	counter("blobcache_stored_as_given_total", "Puts whose value did not shrink under compression, stored as given.", func(s *blobcache.Stats) float64 { return float64(s.StoredAsGiven) })
	counter("blobcache_declined_total", "Puts not written by the admission policy or the write budget (each a later miss).", func(s *blobcache.Stats) float64 { return float64(s.Declined) })
	counter("blobcache_reinserted_total", "Records hit since written, written again before their segment was evicted.", func(s *blobcache.Stats) float64 { return float64(s.Reinserted) })
	counter("blobcache_reinserted_bytes_total", "Bytes of records written again before their segment was evicted.", func(s *blobcache.Stats) float64 { return float64(s.ReinsertedBytes) })
	counter("blobcache_promoted_total", "Records hit in the probation region, copied into the main region when their segment was evicted.", func(s *blobcache.Stats) float64 { return float64(s.Promoted) })
	counter("blobcache_ghost_admits_total", "Puts written straight to the main region because the ghost set remembered their key.", func(s *blobcache.Stats) float64 { return float64(s.GhostAdmits) })
	gauge("blobcache_probation_bytes", "Disk space of the probation region's segments (included in blobcache_disk_bytes).", func(s *blobcache.Stats) float64 { return float64(s.ProbationBytes) })
	counter("blobcache_reinsert_dropped_total", "Records hit since written that went with their segment: reinsertion budget spent, or too large.", func(s *blobcache.Stats) float64 { return float64(s.ReinsertDropped) })
	counter("blobcache_reads_page_cache_total", "Hits of 256 KiB or more served from the page cache, which held them whole.", func(s *blobcache.Stats) float64 { return float64(s.ReadsPageCache) })
	counter("blobcache_written_back_bytes_total", "Batch bytes written through the page cache for the kernel to write back, not with O_DIRECT.", func(s *blobcache.Stats) float64 { return float64(s.WrittenBackBytes) })
	gauge("blobcache_write_back_cpu_seconds_per_mib", "CPU time a MiB of batch written through the page cache has cost lately; past a ceiling, batches go direct (0 until measured).", func(s *blobcache.Stats) float64 { return s.WriteBackCost.Seconds() })
	counter("blobcache_reads_filled_total", "Hits of 256 KiB or more of blobs hit before, read through the page cache and left there.", func(s *blobcache.Stats) float64 { return float64(s.ReadsFilled) })
	counter("blobcache_sent_bytes_total", "Value bytes the kernel sent from segment files to sockets without a copy through user space.", func(s *blobcache.Stats) float64 { return float64(s.SentBytes) })
	counter("blobcache_reads_direct_total", "Hits of 256 KiB or more read from the device with O_DIRECT.", func(s *blobcache.Stats) float64 { return float64(s.ReadsDirect) })
	gauge("blobcache_blobs", "Blobs the cache holds, the write buffer's included.", func(s *blobcache.Stats) float64 { return float64(s.Blobs) })
	gauge("blobcache_segments", "Live segment files.", func(s *blobcache.Stats) float64 { return float64(s.Segments) })
	gauge("blobcache_disk_bytes", "Disk space of the segments (allocated bytes).", func(s *blobcache.Stats) float64 { return float64(s.DiskBytes) })
	gauge("blobcache_data_bytes", "Disk space of the segments without the active segment's preallocated, unwritten tail: what the cache holds.", func(s *blobcache.Stats) float64 { return float64(s.DataBytes) })
	gauge("blobcache_max_size_bytes", "The bound on blobcache_data_bytes in force (--max-size, or the share of the file system recorded when the cache was made); 0 for none.", func(s *blobcache.Stats) float64 { return float64(s.MaxSize) })
	gauge("blobcache_write_budget_bytes_per_second", "The bound on the rate of device writes (--write-budget); 0 for none.", func(s *blobcache.Stats) float64 { return float64(s.WriteBudget) })
	gauge("blobcache_pending_bytes", "Bytes in the write buffer, not yet in a segment.", func(s *blobcache.Stats) float64 { return float64(s.PendingBytes) })
	gauge("blobcache_stray_files", "Files in the cache's directories that the cache did not write, left alone.", func(s *blobcache.Stats) float64 { return float64(s.StrayFiles) })
	gauge("blobcache_write_buffer_bytes", "Memory the write buffers hold (let go when the cache is idle).", func(s *blobcache.Stats) float64 { return float64(s.BufferBytes) })
	gauge("blobcache_read_buffer_bytes", "Memory of the read path's pooled buffers, alive now (shared by the process's caches).", func(s *blobcache.Stats) float64 { return float64(s.ReadBufferBytes) })
	gauge("blobcache_memory_capacity_bytes", "Capacity of the memory tier (0: none).", func(s *blobcache.Stats) float64 { return float64(s.MemoryCapacity) })
	gauge("blobcache_memory_bytes", "Memory the memory tier's values take (keys, values, attributes and a fixed cost each).", func(s *blobcache.Stats) float64 { return float64(s.MemoryBytes) })
	gauge("blobcache_memory_items", "Values the memory tier holds.", func(s *blobcache.Stats) float64 { return float64(s.MemoryItems) })
	counter("blobcache_memory_hits_total", "Reads served from the memory tier (each also a hit).", func(s *blobcache.Stats) float64 { return float64(s.MemoryHits) })
	counter("blobcache_memory_misses_total", "Lookups the memory tier did not hold, read from the segments.", func(s *blobcache.Stats) float64 { return float64(s.MemoryMisses) })
	counter("blobcache_memory_inserts_total", "Values that entered the memory tier.", func(s *blobcache.Stats) float64 { return float64(s.MemoryInserts) })
	counter("blobcache_memory_evictions_total", "Values the memory tier evicted to make room.", func(s *blobcache.Stats) float64 { return float64(s.MemoryEvictions) })
	counter("blobcache_memory_declined_total", "Values the memory tier declined: on their first hit, or too large.", func(s *blobcache.Stats) float64 { return float64(s.MemoryDeclined) })
	gauge("blobcache_index_bytes", "Memory of the index.", func(s *blobcache.Stats) float64 { return float64(s.IndexBytes) })
	gauge("blobcache_bloom_bytes", "Memory of the bloom filter.", func(s *blobcache.Stats) float64 { return float64(s.BloomBytes) })
	gauge("blobcache_bloom_fill_ratio", "Fraction of bloom filter bits set.", func(s *blobcache.Stats) float64 { return s.BloomFill })
	gauge("blobcache_bloom_estimated_fpr", "Estimated false-positive rate of the bloom filter.", func(s *blobcache.Stats) float64 { return s.BloomFPR })
	return c
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.stats {
		ch <- s.desc
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	for _, s := range c.stats {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(&st))
	}
}
