package trace

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// OracleRecordSize is the size of one oracleGeneral record.
const OracleRecordSize = 24

// An oracleGeneral file (libCacheSim's ORACLE_GENERAL_TRACE) is records of 24 bytes back to
// back, little-endian, no header:
//
//	 0        4                12       16                       24
//	+--------+----------------+--------+------------------------+
//	| time   | object id      | size   | next access vtime      |
//	| uint32 | uint64         | uint32 | int64, -1: never again |
//	+--------+----------------+--------+------------------------+
//
// The next access vtime is the index (0-based, in requests) of the object's next request; only
// oracle policies (Belady) read it. ReadOracle drops it; WriteOracle computes it.

// ReadOracle reads an oracleGeneral trace whole. A file whose length is not a multiple of 24
// bytes is malformed (a torn copy, or another format).
func ReadOracle(r io.Reader) ([]Request, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var reqs []Request
	var rec [OracleRecordSize]byte
	for {
		n, err := io.ReadFull(br, rec[:])
		if err == io.EOF {
			return reqs, nil
		}
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%w: oracleGeneral: %d trailing bytes after %d records", ErrFormat, n, len(reqs))
		}
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, Request{
			Time: binary.LittleEndian.Uint32(rec[0:4]),
			ID:   binary.LittleEndian.Uint64(rec[4:12]),
			Size: binary.LittleEndian.Uint32(rec[12:16]),
		})
	}
}

// WriteOracle writes reqs as an oracleGeneral trace, with each request's next access vtime.
func WriteOracle(w io.Writer, reqs []Request) error {
	next := make([]int64, len(reqs))
	last := make(map[uint64]int64, len(reqs)/4)
	for i := len(reqs) - 1; i >= 0; i-- {
		id := reqs[i].ID
		if j, ok := last[id]; ok {
			next[i] = j
		} else {
			next[i] = -1
		}
		last[id] = int64(i)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var rec [OracleRecordSize]byte
	for i, r := range reqs {
		binary.LittleEndian.PutUint32(rec[0:4], r.Time)
		binary.LittleEndian.PutUint64(rec[4:12], r.ID)
		binary.LittleEndian.PutUint32(rec[12:16], r.Size)
		binary.LittleEndian.PutUint64(rec[16:24], uint64(next[i]))
		if _, err := bw.Write(rec[:]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
