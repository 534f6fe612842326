package harness

import (
	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/hist"
	"github.com/seed57392e9e/blobcache/bench/procfs"
)

// Window is one measured stretch of a phase.
// Counts are the operations of a window, or of one goroutine's share of it.
type Counts struct {
	Puts       int64 `json:"puts"`
	Gets       int64 `json:"gets"`
	BytesPut   int64 `json:"bytes_put"`
	BytesGot   int64 `json:"bytes_got"`
	Unexpected int64 `json:"unexpected"` // a present key missing, an absent key found, a wrong length
	Errors     int64 `json:"errors"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Puts += o.Puts
	c.Gets += o.Gets
	c.BytesPut += o.BytesPut
	c.BytesGot += o.BytesGot
	c.Unexpected += o.Unexpected
	c.Errors += o.Errors
}

type Window struct {
	Name         string                  `json:"name"`          // load, mixed, get-hit, get-miss, cold-get, hot-get...
	DatasetKeys  int64                   `json:"dataset_keys"`  // keys in the engine during the window
	DatasetBytes int64                   `json:"dataset_bytes"` // their value bytes
	CacheDropped bool                    `json:"cache_dropped"` // page cache dropped right before
	Ops          int64                   `json:"ops"`
	Seconds      float64                 `json:"seconds"`
	OpsPerSec    float64                 `json:"ops_per_sec"`
	Latency      map[string]hist.Summary `json:"latency"` // by operation: put, get-hit, get-miss

	Counts // flattened into the JSON

	CPU  procfs.CPU  `json:"cpu"`
	IO   procfs.IO   `json:"io"`   // this process
	Disk procfs.Disk `json:"disk"` // the data device, every process
	RSS  int64       `json:"rss"`  // resident at the end of the window
	Go   GoMemory    `json:"go_memory"`

	WriteMBps        float64 `json:"write_mb_per_sec"`      // MB (10^6) put per second
	CPUSeconds       float64 `json:"cpu_seconds"`           // user + sys
	DevReadsPerGet   float64 `json:"device_reads_per_get"`  // diskstats read requests / Gets
	SyscallsPerGet   float64 `json:"read_syscalls_per_get"` // syscr / Gets
	ReadKiBPerGet    float64 `json:"read_kib_per_get"`      // read_bytes / Gets, in KiB
	DevReadKiBPerGet float64 `json:"device_read_kib_per_get"`

	Counters map[string]int64 `json:"engine_counters,omitempty"` // the engine's own counters, deltas over the window
}

// GoMemory is the Go runtime's view of the child's memory (runtime.MemStats): what the Go
// engines allocate and keep; cgo memory (RocksDB's) is not in it.
type GoMemory struct {
	Allocated    int64 `json:"allocated"`     // bytes allocated during the window
	GCs          int64 `json:"gcs"`           // garbage collections during the window
	HeapInuse    int64 `json:"heap_inuse"`    // at the end of the window
	HeapRetained int64 `json:"heap_retained"` // HeapSys - HeapReleased at the end: heap memory held from the OS
	Sys          int64 `json:"sys"`           // everything the runtime holds from the OS
}

// PhaseResult is what a child reports for one engine and one phase.
type PhaseResult struct {
	Engine      string           `json:"engine"`
	Description string           `json:"description"`
	Phase       string           `json:"phase"`
	Rep         int              `json:"rep"`
	Settings    []engine.Setting `json:"settings"`
	Windows     []Window         `json:"windows"`
	Total       Window           `json:"total"` // open to close, all windows and what is between them

	BaselineRSS int64   `json:"baseline_rss"`     // before the engine was opened
	LoadedRSS   int64   `json:"loaded_rss"`       // capacity phase: after the load and a flush
	BytesPerKey float64 `json:"bytes_per_key"`    // capacity phase: (LoadedRSS - BaselineRSS) / keys
	PeakRSS     int64   `json:"peak_rss"`         // VmHWM of the child
	Binary      string  `json:"binary,omitempty"` // the file name of the binary the child ran
	DiskUsed    int64   `json:"disk_used"`        // allocated bytes of the data directory after Close

	// Bytes the process sent to storage (write_bytes - cancelled_write_bytes) over the whole
	// child, per byte Put; and the same from the device's sectors written (every process).
	WriteAmp       float64 `json:"write_amp"`
	DeviceWriteAmp float64 `json:"device_write_amp"`

	DropCaches string `json:"drop_caches"` // "yes", or why not
	LoadAvg    string `json:"load_avg"`    // /proc/loadavg when the child finished: how busy the shared machine was
	Device     string `json:"device"`
	Error      string `json:"error,omitempty"`

	// Filled by the driver from wait4's rusage of the child.
	WallSeconds  float64 `json:"wall_seconds"`
	ChildUserSec float64 `json:"child_user_seconds"`
	ChildSysSec  float64 `json:"child_sys_seconds"`
	ChildMaxRSS  int64   `json:"child_max_rss"`
}

// Window returns the window named name (nil if absent).
func (r *PhaseResult) Window(name string) *Window {
	for i := range r.Windows {
		if r.Windows[i].Name == name {
			return &r.Windows[i]
		}
	}
	return nil
}

// CPUSeconds is the child's user + sys time.
func (r *PhaseResult) CPUSeconds() float64 { return r.ChildUserSec + r.ChildSysSec }
