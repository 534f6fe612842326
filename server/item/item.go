package item

import (
	"encoding/binary"
	"time"
)

// Envelope layout (little-endian), as builds before record metadata wrote it in front of a
// payload with flags or an expiry, or one starting with the magic:
//
//	 0                 8          12                     20
//	 +-----------------+----------+----------------------+----------------
//	 | magic (8 bytes) | flags    | expires (unix s)     | payload ...
//	 | "\x00bcitem\x01"| uint32   | int64, 0 = never     |
//	 +-----------------+----------+----------------------+----------------
//
// The last magic byte is the format version. The header carries no checksum of its own: the
// cache checksums the whole record, header included.

// HeaderSize is the size of the envelope header.
const HeaderSize = 20

// Magic starts every envelope.
const Magic = "\x00bcitem\x01"

// Meta is what the envelope adds to a payload.
type Meta struct {
	Flags   uint32 // memcached client flags
	Expires int64  // unix seconds after which the item is a miss; 0 means never
}

// Expired reports whether the item is past its expiry at now.
func (m Meta) Expired(now time.Time) bool { return m.Expires != 0 && now.Unix() >= m.Expires }

// Decode splits a stored blob's first bytes. head must hold min(HeaderSize, blobSize) bytes of
// the blob. It returns the meta and the number of leading bytes that are header (0 or
// HeaderSize).
func Decode(head []byte, blobSize int64) (Meta, int) {
	if blobSize < HeaderSize || len(head) < HeaderSize || string(head[:8]) != Magic {
		return Meta{}, 0
	}
	return Meta{
		Flags:   binary.LittleEndian.Uint32(head[8:]),
		Expires: int64(binary.LittleEndian.Uint64(head[12:])),
	}, HeaderSize
}

// ExpiresAt converts a memcached exptime to an absolute expiry: 0 is never, up to 30 days is
// relative to now, more is a unix time. ok is false when the item is already expired (a
// negative exptime or an absolute time not after now).
func ExpiresAt(exptime int64, now time.Time) (expires int64, ok bool) {
	const relativeLimit = 30 * 24 * 3600
	switch {
	case exptime == 0:
		return 0, true
	case exptime < 0:
		return 0, false
	case exptime <= relativeLimit:
		return now.Unix() + exptime, true
	case exptime <= now.Unix():
		return 0, false
	}
	return exptime, true
}

// TTL is the remaining lifetime in seconds of an item with expiry expires, -1 for never (the
// memcached meta protocol's convention).
func TTL(expires int64, now time.Time) int64 {
	if expires == 0 {
		return -1
	}
	return max(expires-now.Unix(), 0)
}
