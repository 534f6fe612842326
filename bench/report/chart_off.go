//go:build nocharts

package report

import (
	"errors"

	"github.com/seed57392e9e/blobcache/bench/harness"
)

// Charts, in a binary built with the nocharts tag, draws nothing. run-rocksdb.sh builds the
// engines' child binaries so: gonum/plot parses its fonts when the program starts, which would add
// to every child's RSS (see BENCHMARKS.md), and a child never draws.
func Charts(*harness.Report, string) ([]string, error) {
	return nil, errors.New("report: charts: this binary was built with the nocharts tag (pass -charts \"\")")
}
