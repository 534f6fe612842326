package torture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// Kind is the kind of a log entry.
type Kind uint8

// Kinds of log entries. Begin entries are written before the operation is called, the others
// after it returned.
const (
	PutBegin   Kind = 1 + iota // a Put or UnsafePut of Version is about to be called
	PutOK                      // it returned nil
	PutFail                    // it returned an error
	DelBegin                   // a Delete, numbered Version, is about to be called
	DelOK                      // it returned nil
	DelFail                    // it returned an error
	DrainBegin                 // a Drain numbered Version is about to be called
	DrainOK                    // it returned
	Ready                      // the cache is open
	Mismatch                   // the writer read a value it must not have (Version: what it read; 0: a miss)
	maxKind
)

var kindNames = [...]string{"", "put", "put-ok", "put-fail", "del", "del-ok", "del-fail", "drain", "drain-ok", "ready", "mismatch"}

func (k Kind) String() string {
	if k < maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Entry is one log entry.
type Entry struct {
	Kind    Kind
	Key     uint32
	Version uint64
}

// EntrySize is the encoded size of an entry.
const EntrySize = 24

// Log entry, little-endian:
//
//	0      1          4          8                    16         20         24
//	+------+----------+----------+--------------------+----------+----------+
//	| kind | zero     | key      | version            | zero     | crc32c   |
//	+------+----------+----------+--------------------+----------+----------+
//
// crc32c is the CRC-32C of bytes 0..20.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by errors about log bytes that are not a whole entry.
var ErrCorrupt = errors.New("torture: corrupt log entry")

// Encode writes e into b, which must hold EntrySize bytes.
func (e Entry) Encode(b []byte) {
	_ = b[EntrySize-1]
	clear(b[:EntrySize])
	b[0] = byte(e.Kind)
	binary.LittleEndian.PutUint32(b[4:], e.Key)
	binary.LittleEndian.PutUint64(b[8:], e.Version)
	binary.LittleEndian.PutUint32(b[20:], crc32.Checksum(b[:20], castagnoli))
}

// Decode decodes one entry from the start of b. Checks, in order: length, kind, zero bytes,
// checksum.
func Decode(b []byte) (Entry, error) {
	if len(b) < EntrySize {
		return Entry{}, fmt.Errorf("%w: %d bytes, an entry is %d", ErrCorrupt, len(b), EntrySize)
	}
	e := Entry{Kind: Kind(b[0]), Key: binary.LittleEndian.Uint32(b[4:]), Version: binary.LittleEndian.Uint64(b[8:])}
	if e.Kind == 0 || e.Kind >= maxKind {
		return Entry{}, fmt.Errorf("%w: kind %d", ErrCorrupt, b[0])
	}
	if b[1]|b[2]|b[3]|b[16]|b[17]|b[18]|b[19] != 0 {
		return Entry{}, fmt.Errorf("%w: reserved bytes not zero", ErrCorrupt)
	}
	if stored, computed := binary.LittleEndian.Uint32(b[20:]), crc32.Checksum(b[:20], castagnoli); stored != computed {
		return Entry{}, fmt.Errorf("%w: crc32c stored %#08x, computed %#08x", ErrCorrupt, stored, computed)
	}
	return e, nil
}

// DecodeAll decodes the entries of a log. It stops at the first entry that does not decode (the
// end of a log cut short) and returns the entries before it and the error, if any.
func DecodeAll(b []byte) ([]Entry, error) {
	entries := make([]Entry, 0, len(b)/EntrySize)
	for off := 0; off < len(b); off += EntrySize {
		e, err := Decode(b[off:])
		if err != nil {
			return entries, fmt.Errorf("offset %d: %w", off, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ReadLog reads the log file at path. A torn last entry is dropped silently; damage before the
// end is an error.
func ReadLog(path string) ([]Entry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entries, err := DecodeAll(b)
	if err != nil && len(entries)*EntrySize+EntrySize < len(b) {
		return entries, fmt.Errorf("torture: %s: %w", path, err)
	}
	return entries, nil
}

// Log is an append-only operation log. Each Append is one write(2) of one entry; Sync makes the
// entries so far durable.
type Log struct {
	mu sync.Mutex
	f  *os.File
	b  [EntrySize]byte
}

// CreateLog creates (or truncates) the log file at path.
func CreateLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Log{f: f}, nil
}

// Append writes one entry.
func (l *Log) Append(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Encode(l.b[:])
	_, err := l.f.Write(l.b[:])
	return err
}

// Sync fsyncs the log.
func (l *Log) Sync() error { return l.f.Sync() }

// Close closes the log file.
func (l *Log) Close() error { return l.f.Close() }

var _ io.Closer = (*Log)(nil)
