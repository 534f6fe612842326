package bloom

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/seed57392e9e/blobcache/internal/bitset"
)

// Stamp is an opaque watermark saved with the filter. The cache stores in it
// whatever tells it that a saved filter matches the data on disk (segment
// ids, sequence numbers); this package only writes and returns it.
type Stamp [4]uint64

// File format of bloom.dat, version 2, little-endian throughout:
//
//	0                   8          12         16                  24
//	+-------------------+----------+----------+-------------------+
//	| magic "BCBLOOM\0" | version  | k        | nwords            |
//	|                   | uint32=2 | uint32=5 | uint64            |
//	+-------------------+----------+----------+-------------------+
//	24                                                            56
//	+-------------------------------------------------------------+
//	| stamp: 4 x uint64                                           |
//	+-------------------------------------------------------------+
//	56                                      56+8*nwords       +4
//	+---------------------------------------+-----------------+
//	| words: nwords x uint64                | crc32c          |
//	| (word i holds filter bits 64i..64i+63,| of bytes before |
//	|  bit j of the word is 1<<j)           |                 |
//	+---------------------------------------+-----------------+
//
// The file ends right after the checksum. Decode checks, in this order: the
// magic, the version (version 1, the 512-bit-block layout, is refused: its
// bits mean nothing to this filter, and the cache rebuilds from its index),
// that k is K, that nwords is in [1, MaxBytes/8] and a size New makes
// (bitset.WordsFor(64*nwords) == nwords: whole huge pages from
// bitset.HugeMinBytes up), that the input is long enough (when its length can
// be known up front), then the checksum, then that nothing follows it.
const (
	magic      = "BCBLOOM\x00"
	version    = 2
	headerSize = 56
	crcSize    = 4

	// chunkSize is how much is read or written per call; also the step in
	// which a reader of unknown length is read before the size it claims is
	// trusted.
	chunkSize = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// WriteTo writes the filter and stamp to w in the bloom.dat format and returns
// the number of bytes written. It may run alongside Add: the file then holds
// every key added before WriteTo began and some added during it, and its
// checksum matches its bytes. So a caller should read the stamp for the
// state of the data before calling WriteTo, never after.
//
// WriteTo does not sync or rename; write to a temporary file, fsync it,
// rename it over bloom.dat and fsync the directory.
func (f *Filter) WriteTo(w io.Writer, stamp Stamp) (int64, error) {
	buf := make([]byte, 0, min(chunkSize, headerSize+f.Bytes()+crcSize))
	buf = append(buf, magic...)
	buf = binary.LittleEndian.AppendUint32(buf, version)
	buf = binary.LittleEndian.AppendUint32(buf, K)
	buf = binary.LittleEndian.AppendUint64(buf, f.Words())
	for _, s := range stamp {
		buf = binary.LittleEndian.AppendUint64(buf, s)
	}
	var (
		written int64
		crc     uint32
	)
	write := func() error {
		n, err := w.Write(buf)
		written += int64(n)
		buf = buf[:0]
		return err
	}
	for i := range f.bits.Words() {
		if len(buf)+8 > cap(buf) {
			crc = crc32.Update(crc, castagnoli, buf)
			if err := write(); err != nil {
				return written, err
			}
		}
		buf = binary.LittleEndian.AppendUint64(buf, f.bits.LoadWord(i))
	}
	crc = crc32.Update(crc, castagnoli, buf)
	buf = binary.LittleEndian.AppendUint32(buf, crc)
	return written, write()
}

// Decode reads a filter written by WriteTo and returns it with its stamp (a
// zero Stamp on error). It consumes r to its end: bytes after the checksum are
// an error.
//
// Malformed input returns an error wrapping ErrCorrupt (and, for a truncated
// file, io.ErrUnexpectedEOF); a failed read returns the reader's error,
// wrapped. Decode never allocates more than the input can back: when r
// reports its remaining length (Len, as bytes.Reader has, or Seek, as
// *os.File has) a size larger than the input is rejected before any
// allocation; otherwise a file over chunkSize is read in, chunk by chunk,
// before the filter is allocated, so a huge claimed size with short input
// fails after allocating about the size of the input.
func Decode(r io.Reader) (*Filter, Stamp, error) {
	var stamp Stamp
	var hdr [headerSize]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, Stamp{}, readError("header", int64(n), err)
	}
	if string(hdr[:8]) != magic {
		return nil, Stamp{}, fmt.Errorf("%w: bad magic %q at offset 0", ErrCorrupt, hdr[:8])
	}
	switch v := binary.LittleEndian.Uint32(hdr[8:]); v {
	case version:
	case 1:
		return nil, Stamp{}, fmt.Errorf("%w: unsupported version 1 at offset 8 (the 512-bit-block layout; this is version %d)",
			ErrCorrupt, version)
	default:
		return nil, Stamp{}, fmt.Errorf("%w: unsupported version %d at offset 8", ErrCorrupt, v)
	}
	if k := binary.LittleEndian.Uint32(hdr[12:]); k != K {
		return nil, Stamp{}, fmt.Errorf("%w: k %d at offset 12, want %d", ErrCorrupt, k, K)
	}
	nwords := binary.LittleEndian.Uint64(hdr[16:])
	if nwords < 1 || nwords > maxWords {
		return nil, Stamp{}, fmt.Errorf("%w: nwords %d at offset 16 not in [1, %d]", ErrCorrupt, nwords, maxWords)
	}
	if want := bitset.WordsFor(nwords * 64); want != nwords {
		return nil, Stamp{}, fmt.Errorf("%w: nwords %d at offset 16 is not a filter size (whole huge pages: %d)",
			ErrCorrupt, nwords, want)
	}
	for i := range stamp {
		stamp[i] = binary.LittleEndian.Uint64(hdr[24+8*i:])
	}
	rest := int64(nwords)*8 + crcSize
	fileSize := headerSize + rest

	src := r
	remaining, known, err := remainingLen(r)
	if err != nil {
		return nil, Stamp{}, err
	}
	if known {
		if remaining < rest {
			return nil, Stamp{}, fmt.Errorf("%w: truncated: nwords %d needs a %d-byte file, have %d bytes: %w",
				ErrCorrupt, nwords, fileSize, headerSize+remaining, io.ErrUnexpectedEOF)
		}
	} else if rest > chunkSize {
		// The claimed size is not backed by anything yet: read the input in
		// chunks first, so that memory grows only as bytes arrive.
		var chunks []io.Reader
		for off := int64(headerSize); off < fileSize; {
			c := make([]byte, min(chunkSize, fileSize-off))
			n, err := io.ReadFull(r, c)
			if err != nil {
				return nil, Stamp{}, readError("words", off+int64(n), err)
			}
			chunks = append(chunks, bytes.NewReader(c))
			off += int64(n)
		}
		src = io.MultiReader(chunks...)
	}

	f := newFilter(nwords)
	crc := crc32.Update(0, castagnoli, hdr[:])
	buf := make([]byte, min(chunkSize, rest))
	off := int64(headerSize)
	for w, nw := 0, f.bits.Words(); w < nw; {
		chunk := buf[:min(len(buf)/8, nw-w)*8]
		n, err := io.ReadFull(src, chunk)
		if err != nil {
			return nil, Stamp{}, readError("words", off+int64(n), err)
		}
		crc = crc32.Update(crc, castagnoli, chunk)
		for i := 0; i < len(chunk); i += 8 {
			f.bits.StoreWord(w, binary.LittleEndian.Uint64(chunk[i:]))
			w++
		}
		off += int64(len(chunk))
	}
	var tail [crcSize + 1]byte
	if n, err := io.ReadFull(src, tail[:crcSize]); err != nil {
		return nil, Stamp{}, readError("checksum", off+int64(n), err)
	}
	if stored := binary.LittleEndian.Uint32(tail[:]); stored != crc {
		return nil, Stamp{}, fmt.Errorf("%w: checksum at offset %d: stored %#08x, computed %#08x",
			ErrCorrupt, off, stored, crc)
	}
	// The checksum must end the input. src is either r or a buffer holding
	// exactly rest bytes, so look at r.
	switch n, err := io.ReadFull(r, tail[crcSize:]); {
	case n > 0:
		return nil, Stamp{}, fmt.Errorf("%w: trailing bytes after offset %d", ErrCorrupt, fileSize)
	case err != io.EOF:
		return nil, Stamp{}, fmt.Errorf("bloom: reading past offset %d: %w", fileSize, err)
	}
	return f, stamp, nil
}

// readError reports a failed read of part at offset off: running out of input
// is corruption (a truncated file), anything else is the reader's error.
func readError(part string, off int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: truncated in %s at offset %d: %w", ErrCorrupt, part, off, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("bloom: reading %s at offset %d: %w", part, off, err)
}

// remainingLen returns how many bytes r holds from its current position, and
// whether r could tell without being consumed.
func remainingLen(r io.Reader) (n int64, known bool, err error) {
	switch r := r.(type) {
	case interface{ Len() int }:
		return int64(r.Len()), true, nil
	case io.Seeker:
		cur, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false, nil // not seekable after all, a pipe say
		}
		end, err := r.Seek(0, io.SeekEnd)
		if err != nil {
			return 0, false, nil
		}
		if _, err := r.Seek(cur, io.SeekStart); err != nil {
			return 0, false, fmt.Errorf("bloom: seeking back to offset %d: %w", headerSize, err)
		}
		return max(0, end-cur), true, nil
	}
	return 0, false, nil
}
