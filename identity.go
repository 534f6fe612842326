package blobcache

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// The identity file marks a directory as a BlobCache and records the format version.
//
//	0                   8          12         16                 24         28         32
//	+-------------------+----------+----------+------------------+----------+----------+
//	| magic "BLOBCACH"  | version  | flags    | created (unix ns)| reserved | crc32c   |
//	+-------------------+----------+----------+------------------+----------+----------+
//
// crc32c covers bytes 0..28. Checked in order: magic, version, crc.
const (
	identityFile  = "BLOBCACHE"
	identitySize  = 32
	identityMagic = "BLOBCACH"
	// identityVersion 2: records may carry the meta block (record format 2) and the directory
	// has a STATE file. A directory of version 1 opens and is upgraded; builds that read only
	// version 1 refuse a version-2 directory rather than misread its records.
	identityVersion       = 2
	identityLegacyVersion = 1
)

// flagPerBlob marks a cache of one file per blob (Options.PerBlobFiles).
const flagPerBlob = 1

type identity struct {
	Version uint32
	Flags   uint32
	Created int64
}

func (id identity) encode() []byte {
	b := make([]byte, identitySize)
	copy(b, identityMagic)
	binary.LittleEndian.PutUint32(b[8:], id.Version)
	binary.LittleEndian.PutUint32(b[12:], id.Flags)
	binary.LittleEndian.PutUint64(b[16:], uint64(id.Created))
	binary.LittleEndian.PutUint32(b[28:], record.CRC(b[:28]))
	return b
}

func decodeIdentity(b []byte) (identity, error) {
	if len(b) != identitySize {
		return identity{}, fmt.Errorf("%w: identity file is %d bytes, want %d", ErrCorrupt, len(b), identitySize)
	}
	if string(b[:8]) != identityMagic {
		return identity{}, fmt.Errorf("%w: identity file has magic %q", ErrNotBlobCache, b[:8])
	}
	id := identity{
		Version: binary.LittleEndian.Uint32(b[8:]),
		Flags:   binary.LittleEndian.Uint32(b[12:]),
		Created: int64(binary.LittleEndian.Uint64(b[16:])),
	}
	if id.Version != identityVersion && id.Version != identityLegacyVersion {
		return identity{}, fmt.Errorf("%w: format version %d, this build reads %d", ErrCorrupt, id.Version, identityVersion)
	}
	if binary.LittleEndian.Uint32(b[24:]) != 0 {
		return identity{}, fmt.Errorf("%w: identity file has reserved bytes set", ErrCorrupt)
	}
	if got, want := record.CRC(b[:28]), binary.LittleEndian.Uint32(b[28:]); got != want {
		return identity{}, fmt.Errorf("%w: identity file crc %#08x, stored %#08x", ErrCorrupt, got, want)
	}
	return id, nil
}

func newIdentity() identity {
	return identity{Version: identityVersion, Created: time.Now().UnixNano()}
}

func (id identity) withMode(perBlob bool) identity {
	if perBlob {
		id.Flags |= flagPerBlob
	}
	return id
}
