//go:build nocharts

package report

import (
	"testing"

	"github.com/seed57392e9e/blobcache/bench/harness"
)

// The child binaries' build (run-rocksdb.sh) draws no charts, and says so rather than writing
// nothing silently.
func TestChartsOff(t *testing.T) {
	files, err := Charts(&harness.Report{}, t.TempDir())
	if err == nil || files != nil {
		t.Fatalf("Charts = %v, %v; want no files and an error", files, err)
	}
}
