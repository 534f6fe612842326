package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// HeaderSize is the size of the header block; the first record starts here,
// aligned for direct I/O.
const HeaderSize = 4096

// MaxSize is the largest segment: footer entries hold uint32 offsets and
// lengths.
const MaxSize = math.MaxUint32

// FileName returns the file name of segment id: ten decimal digits and
// ".seg", so names sort by id.
func FileName(id uint32) string {
	return fmt.Sprintf("%010d.seg", id)
}

// ParseFileName returns the id of a segment file name made by FileName, and
// false for any other name.
func ParseFileName(name string) (uint32, bool) {
	digits, ok := strings.CutSuffix(name, ".seg")
	if !ok || len(digits) != 10 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(id), true
}

// Options say how a segment is written.
type Options struct {
	// Direct writes batches through an O_DIRECT descriptor, bypassing the
	// page cache: each batch must then be one vfs.AlignedBuffer whose
	// length and offset are multiples of 4096 (pad records fill the gaps).
	// Default false: buffered writes, which cost page-cache memory and a
	// copy but accept any batch.
	Direct bool

	// Sync makes WriteBatch and Seal durable before they return
	// (fdatasync), and Create sync the file and its directory. Default
	// false: faster, but a crash loses what the kernel had not written
	// back (Scan then reports a torn tail).
	Sync bool
}

// Active is a segment being filled. WriteBatch calls at disjoint offsets may
// run concurrently; Seal and Close must not overlap them.
//
// Placement: records go one after the other from the header block on, and
// each will need a footer entry when the segment is sealed. Reserve gives
// each batch or streamed record its offset only while the records placed so
// far, their footer and the trailer fit in the capacity, so a seal always
// fits. The placement methods are not safe for concurrent use: the writer
// calls them under its lock.
type Active struct {
	id       uint32
	opts     Options
	capacity int64
	// allocated is how much of the file is preallocated: FirstAllocation at Create, the whole
	// capacity once the records pass it (Grow).
	allocated int64
	end       int64 // where the next record goes
	footer    int64 // bytes of footer entries for what is placed
	// f is the buffered descriptor: readers pread from it while the
	// segment is active and after it is sealed; the footer is written
	// through it.
	f vfs.File
	// direct is the O_DIRECT descriptor batches are written through, nil
	// without Options.Direct and after Seal.
	direct vfs.File
	// log holds the footer entries of the records committed so far (AddEntry).
	log    entryLog
	sealed bool
}

// Create creates segment id in dir: the file must not exist. It writes the
// header block, preallocates capacity bytes (where the file system can) so
// batch writes do not run out of space, and with Options.Sync makes the new
// file durable, directory entry included.
func Create(fs vfs.FS, dir string, id uint32, capacity int64, opts Options) (_ *Active, err error) {
	if capacity < HeaderSize || capacity > MaxSize {
		return nil, fmt.Errorf("segment: capacity %d outside [%d, %d]", capacity, HeaderSize, int64(MaxSize))
	}
	name := filepath.Join(dir, FileName(id))
	f, err := fs.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment: create: %w", err)
	}
	a := &Active{id: id, opts: opts, f: f, capacity: capacity, end: HeaderSize}
	a.log = entryLog{fs: fs, name: filepath.Join(dir, EntryLogName(id))}
	defer func() {
		if err != nil {
			a.Close()
			fs.Remove(name)
		}
	}()

	var flags uint32
	if opts.Direct {
		flags |= FlagDirect
	}
	block := make([]byte, HeaderSize)
	Header{Version: Version, Flags: flags, ID: id, Created: time.Now().UnixNano()}.Encode(block)
	if _, err := f.WriteAt(block, 0); err != nil {
		return nil, fmt.Errorf("segment: write header of %s: %w", name, err)
	}
	a.allocated = FirstAllocation(capacity)
	if err := f.Allocate(0, a.allocated); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return nil, fmt.Errorf("segment: preallocate %s: %w", name, err)
	}
	if opts.Direct {
		d, err := fs.OpenDirect(name, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("segment: open %s for direct I/O: %w", name, err)
		}
		a.direct = d
	}
	if opts.Sync {
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("segment: sync %s: %w", name, err)
		}
		if err := fs.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("segment: sync directory %s: %w", dir, err)
		}
	}
	return a, nil
}

// MaxRecordLen returns the length of the longest record a segment of capacity
// bytes holds: alone, after the header block, with its footer entry and the
// trailer.
func MaxRecordLen(capacity int64) int64 {
	return capacity - HeaderSize - EntrySize - TrailerSize
}

// Fits reports whether n more bytes of records, with entries footer
// entries, fit: records, footer and trailer within the capacity.
func (a *Active) Fits(n int64, entries int) bool {
	return a.end+n+a.footer+int64(entries)*EntrySize+TrailerSize <= a.capacity
}

// Reserve places n bytes of records with entries footer entries at the end
// of what is placed, and returns their offset; ok is false (and nothing is
// placed) if they do not fit.
func (a *Active) Reserve(n int64, entries int) (off int64, ok bool) {
	if !a.Fits(n, entries) {
		return 0, false
	}
	off = a.end
	a.end += n
	a.footer += int64(entries) * EntrySize
	return off, true
}

// FirstAllocation is how much of a segment of capacity bytes Create preallocates: half of it, in
// whole blocks. A cache with two segments being filled at once then holds at most one segment of
// preallocated space no record uses yet, not two.
func FirstAllocation(capacity int64) int64 {
	return min((capacity/2+allocationUnit-1)/allocationUnit*allocationUnit, capacity)
}

// Allocation is how much of a segment of capacity bytes is preallocated once used bytes of it
// (header, records, their footer and the trailer: SealedSize) are placed: the first allocation
// until used passes it, the whole capacity from then on.
func Allocation(capacity, used int64) int64 {
	if first := FirstAllocation(capacity); used <= first {
		return first
	}
	return capacity
}

// allocationUnit is the granularity of preallocation: a file system block.
const allocationUnit = 4096

// Allocated is how many bytes of the file are preallocated.
func (a *Active) Allocated() int64 { return a.allocated }

// Grow preallocates what Allocation asks for what is placed so far, and returns the bytes it
// added (0 if there was no need). A file system that cannot preallocate is not an error: the
// writes allocate as they go, and the bytes count as added. On any other error nothing is added
// and Grow may be called again.
func (a *Active) Grow() (int64, error) {
	want := Allocation(a.capacity, a.SealedSize())
	if want <= a.allocated {
		return 0, nil
	}
	if err := a.f.Allocate(a.allocated, want-a.allocated); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return 0, err
	}
	n := want - a.allocated
	a.allocated = want
	return n, nil
}

// End is where the records placed so far end: the data end a seal writes.
func (a *Active) End() int64 { return a.end }

// SealedSize is the size the file will have once sealed with what is placed
// so far: records, footer and trailer.
func (a *Active) SealedSize() int64 { return a.end + a.footer + TrailerSize }

// ID returns the segment's id.
func (a *Active) ID() uint32 { return a.id }

// Direct reports whether batches are written with O_DIRECT (Options.Direct, and a file system
// that took it).
func (a *Active) Direct() bool { return a.direct != nil }

// File returns the buffered descriptor, for reads while the segment is
// active and after it is sealed. It stays open until Close.
func (a *Active) File() vfs.File { return a.f }

// WriteBatch writes bufs (encoded records, back to back) at off, which the
// caller has reserved. With Options.Direct, bufs must be a single
// vfs.AlignedBuffer whose length and off are multiples of 4096. With
// Options.Sync the batch is durable when WriteBatch returns.
func (a *Active) WriteBatch(bufs [][]byte, off int64) error {
	if err := a.Write(bufs, off); err != nil {
		return err
	}
	if a.opts.Sync {
		return a.Sync()
	}
	return nil
}

// Write is WriteBatch without the sync: bufs are written at off, which the
// caller has reserved, with the same alignment rules, and are durable only
// after a Sync (or a WriteBatch or Seal that syncs).
func (a *Active) Write(bufs [][]byte, off int64) error { return a.write(bufs, off, a.direct != nil) }

// WriteThroughCache is Write through the page cache, with Options.Direct as without: the
// bytes stay in the page cache, dirty until the kernel writes them back or a Sync. The
// alignment rules of Options.Direct still hold, so that the batches around it can be
// written direct.
func (a *Active) WriteThroughCache(bufs [][]byte, off int64) error { return a.write(bufs, off, false) }

func (a *Active) write(bufs [][]byte, off int64, direct bool) error {
	if a.sealed {
		return fmt.Errorf("%w: write batch to %s", ErrSealed, a.f.Name())
	}
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	if off < HeaderSize || off+n > MaxSize {
		return fmt.Errorf("segment: batch [%d, %d) of %s is outside [%d, %d)", off, off+n, a.f.Name(), HeaderSize, int64(MaxSize))
	}
	f := a.f
	if a.direct != nil {
		if len(bufs) != 1 || !vfs.IsAligned(bufs[0]) || off%vfs.DirectIOAlignment != 0 {
			return fmt.Errorf("%w: %d buffers, %d bytes at offset %d of %s (want one aligned buffer, length and offset multiples of %d)",
				ErrMisaligned, len(bufs), n, off, a.f.Name(), vfs.DirectIOAlignment)
		}
		if direct {
			f = a.direct
		}
	}
	if _, err := f.WritevAt(bufs, off); err != nil {
		return fmt.Errorf("segment: write batch at %d: %w", off, err)
	}
	return nil
}

// Sync makes every write so far durable (fdatasync, F_FULLFSYNC on Darwin).
func (a *Active) Sync() error {
	f := a.f
	if a.direct != nil {
		f = a.direct
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", a.f.Name(), err)
	}
	return nil
}

// AddEntry adds the footer entry of a committed record (a put or a delete, in the order they
// are committed: records placed behind a streamed record may come before it). The entry is
// kept in the entry log, not in memory, until Seal. A failure to log it makes Seal fail.
func (a *Active) AddEntry(e Entry) { a.log.add(e) }

// Entries is how many footer entries the records placed so far need.
func (a *Active) Entries() int64 { return a.footer / EntrySize }

// Seal writes the footer of the entries added (in record order) at dataEnd,
// the end of the last record, and truncates the file there; see
// WriteFooter. It closes the direct descriptor; File stays open. On error
// the segment stays active and Seal may be retried. DropLog removes the
// entry log, sealed or not.
func (a *Active) Seal(dataEnd int64) (size int64, err error) {
	if a.sealed {
		return 0, fmt.Errorf("%w: seal %s", ErrSealed, a.f.Name())
	}
	if err := checkDataEnd(dataEnd); err != nil {
		return 0, fmt.Errorf("segment: cannot seal %s: %w", a.f.Name(), err)
	}
	w := newFooterWriter(a.f, dataEnd)
	if err := a.log.each(w.add); err != nil {
		return 0, err
	}
	if size, err = w.finish(a.opts.Sync); err != nil {
		return 0, err
	}
	a.sealed = true
	if a.direct != nil {
		err = a.direct.Close()
		a.direct = nil
	}
	return size, err
}

// DropLog removes the entry log: after Seal, or when the segment will not be sealed (a crash
// cannot be told from that, and recovery removes the logs a crash leaves).
func (a *Active) DropLog() error { return a.log.drop() }

// Close closes the segment's descriptors.
func (a *Active) Close() error {
	var err error
	if a.direct != nil {
		err = a.direct.Close()
		a.direct = nil
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if a.log.f != nil {
		if cerr := a.log.f.Close(); err == nil {
			err = cerr
		}
		a.log.f = nil
	}
	return err
}

// FreedRange is the part of the record [off, off+length) that is punched out once the record is
// dead (overwritten or deleted): every whole block past its header and the longest key, so
// that the header and key stay and a scan can still read them and step over the record. The
// range is empty (end <= start) for a record without such a block.
func FreedRange(off, length int64) (start, end int64) {
	const block = vfs.DirectIOAlignment
	start = (off + record.HeaderSize + record.MaxKeyLen + block - 1) / block * block
	end = (off + length) / block * block
	return start, end
}

// Open opens segment id in dir for reading and writing (to seal it after
// recovery), checks its header block and that the header names id, and
// returns the file with its size.
func Open(fs vfs.FS, dir string, id uint32) (f vfs.File, size int64, err error) {
	return open(fs, dir, id, os.O_RDWR)
}

// OpenReadOnly is Open for reading alone: it works on a read-only file
// system and on files the caller may not write.
func OpenReadOnly(fs vfs.FS, dir string, id uint32) (f vfs.File, size int64, err error) {
	return open(fs, dir, id, os.O_RDONLY)
}

func open(fs vfs.FS, dir string, id uint32, flag int) (f vfs.File, size int64, err error) {
	name := filepath.Join(dir, FileName(id))
	file, err := fs.OpenFile(name, flag, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open: %w", err)
	}
	if size, err = checkHeader(file, name, id); err != nil {
		file.Close()
		return nil, 0, err
	}
	return file, size, nil
}

// checkHeader returns the size of segment file f after checking its header
// block names segment id.
func checkHeader(f vfs.File, name string, id uint32) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment: stat %s: %w", name, err)
	}
	size := fi.Size()
	if size < HeaderSize {
		return 0, corruptedf(name, 0, "%w: file of %d bytes is shorter than the %d-byte header block", record.ErrTruncated, size, HeaderSize)
	}
	var buf [HeaderLen]byte
	if err := readFull(f, buf[:], 0); err != nil {
		return 0, fmt.Errorf("segment: read header of %s: %w", name, err)
	}
	h, err := DecodeHeader(buf[:])
	if err != nil {
		return 0, corrupted(name, 0, err)
	}
	if h.ID != id {
		return 0, corruptedf(name, 0, "header names segment %d, file name segment %d", h.ID, id)
	}
	return size, nil
}

// ReadFooter reads and checks the hint footer of a sealed segment of the
// given size. For a segment without a footer trailer (unsealed, or a seal a
// crash cut short) the error wraps ErrNoFooter; a footer that fails
// its checks gives a CorruptionError. Either way Scan recovers the records.
func ReadFooter(f vfs.File, size int64) (entries []Entry, dataEnd int64, err error) {
	count, dataEnd, err := CheckFooter(f, size)
	if err != nil {
		return nil, 0, err
	}
	entries = make([]Entry, 0, count)
	err = EachFooterEntry(f, dataEnd, count, func(e Entry) error {
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return entries, dataEnd, nil
}

// CheckFooter checks the hint footer of a sealed segment of the given size as ReadFooter does,
// reading its entries a chunk at a time and keeping none, and returns their count and the data
// end. EachFooterEntry then hands them over.
func CheckFooter(f vfs.File, size int64) (count int, dataEnd int64, err error) {
	name := f.Name()
	if size < HeaderSize+TrailerSize {
		return 0, 0, fmt.Errorf("segment %s: %w", name, ErrNoFooter)
	}
	trailerOff := size - TrailerSize
	var t [TrailerSize]byte
	if err := readFull(f, t[:], trailerOff); err != nil {
		return 0, 0, fmt.Errorf("segment: read footer trailer of %s: %w", name, err)
	}
	n, end, crc, err := DecodeTrailer(t[:])
	if errors.Is(err, ErrNoFooter) {
		return 0, 0, fmt.Errorf("segment %s: %w", name, ErrNoFooter)
	}
	if err != nil {
		return 0, 0, corrupted(name, trailerOff, err)
	}
	if end < HeaderSize || end > uint64(trailerOff) || int64(end)+int64(n)*EntrySize != trailerOff {
		return 0, 0, corruptedf(name, trailerOff, "%w: footer of %d entries from data end %d does not end the %d-byte file",
			record.ErrBadLength, n, end, size)
	}
	dataEnd = int64(end)
	// The checksum is judged first, as DecodeEntries does: an entry that fails its checks in a
	// footer whose checksum fails is reported as the checksum's failure.
	check := entryCheck{dataEnd: dataEnd, next: HeaderSize}
	var computed uint32
	var bad error
	err = eachFooterChunk(f, dataEnd, int(n), func(b []byte, first int) error {
		computed = record.UpdateCRC(computed, b)
		for i := 0; i < len(b) && bad == nil; i += EntrySize {
			e, err := decodeEntry(b[i:i+EntrySize], first+i/EntrySize)
			if err == nil {
				err = check.entry(e, first+i/EntrySize)
			}
			if err != nil {
				bad = corrupted(name, dataEnd, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if computed != crc {
		return 0, 0, corrupted(name, dataEnd, checksumError(ErrFooterChecksum, "footer entries", crc, computed))
	}
	if bad != nil {
		return 0, 0, bad
	}
	return int(n), dataEnd, nil
}

// EachFooterEntry calls fn with each of the count entries of the footer that starts at dataEnd,
// which CheckFooter has checked, reading them a chunk at a time.
func EachFooterEntry(f vfs.File, dataEnd int64, count int, fn func(Entry) error) error {
	return eachFooterChunk(f, dataEnd, count, func(b []byte, first int) error {
		for i := 0; i < len(b); i += EntrySize {
			e, err := decodeEntry(b[i:i+EntrySize], first+i/EntrySize)
			if err != nil {
				return corrupted(f.Name(), dataEnd+int64(first)*EntrySize+int64(i), err) // changed since checked
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// footerReadEntries is how many footer entries are read at a time.
const footerReadEntries = footerWriteChunk / EntrySize

// eachFooterChunk reads the count entries from dataEnd a chunk at a time and calls fn with the
// bytes of each chunk and the index of its first entry.
func eachFooterChunk(f vfs.File, dataEnd int64, count int, fn func(b []byte, first int) error) error {
	buf := make([]byte, min(count, footerReadEntries)*EntrySize)
	for first := 0; first < count; first += footerReadEntries {
		b := buf[:min(count-first, footerReadEntries)*EntrySize]
		if err := readFull(f, b, dataEnd+int64(first)*EntrySize); err != nil {
			return fmt.Errorf("segment: read footer entries of %s: %w", f.Name(), err)
		}
		if err := fn(b, first); err != nil {
			return err
		}
	}
	return nil
}

// readFull reads len(b) bytes at off. A read cut short by the end of the
// file is io.ErrUnexpectedEOF: the caller asked for bytes the file's size
// said were there.
func readFull(f io.ReaderAt, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
