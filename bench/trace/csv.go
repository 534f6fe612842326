package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ReadCSV reads a trace of "key,size" lines (more columns are ignored). A first line whose size
// is not a number is taken for a header. Keys are arbitrary strings, numbered 1, 2, ... in order
// of first appearance (so WriteOracle can store them); a request's Time is its line number.
func ReadCSV(r io.Reader) ([]Request, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	ids := map[string]uint64{}
	var reqs []Request
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return reqs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: csv: %w", ErrFormat, err)
		}
		if len(rec) < 2 {
			return nil, fmt.Errorf("%w: csv line %d: want key,size, got %d fields", ErrFormat, line, len(rec))
		}
		size, err := strconv.ParseUint(strings.TrimSpace(rec[1]), 10, 32)
		if err != nil {
			if line == 1 {
				continue // a header
			}
			return nil, fmt.Errorf("%w: csv line %d: size %q: %w", ErrFormat, line, rec[1], err)
		}
		key := strings.TrimSpace(rec[0])
		id, ok := ids[key]
		if !ok {
			id = uint64(len(ids) + 1)
			ids[key] = id
		}
		reqs = append(reqs, Request{ID: id, Size: uint32(size), Time: uint32(line)})
	}
}
