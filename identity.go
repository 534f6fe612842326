package blobcache

import (
	"errors"
	"fmt"
	"time"

	"github.com/seed57392e9e/blobcache/internal/cachedir"
)

// The identity file marks a directory as a BlobCache and records the format version.
//
//	0                   8          12         16                 24         28         32
//	+-------------------+----------+----------+------------------+----------+----------+
//	| magic "BLOBCACH"  | version  | flags    | created (unix ns)| reserved | crc32c   |
//	+-------------------+----------+----------+------------------+----------+----------+
//
// crc32c covers bytes 0..28. Checked in order: length, magic, version, reserved, crc.
var identityFormat = cachedir.Format{
	Name:     "identity file",
	Magic:    "BLOBCACH",
	Fields:   []int{4, 4, 8}, // version, flags, created
	Reserved: 4,
	Check: func(f []uint64) error {
		if v := f[0]; v < identityLegacyVersion || v > identityCompressedVersion {
			return fmt.Errorf("format version %d, this build reads %d to %d", v, identityLegacyVersion, identityCompressedVersion)
		}
		return nil
	},
}

const (
	// identityVersion 2: records may carry the meta block (record format 2) and the directory
	// has a STATE file. A directory of version 1 opens and is upgraded; builds that read only
	// version 1 refuse a version-2 directory rather than misread its records.
	identityVersion       = 2
	identityLegacyVersion = 1
	// identityCompressedVersion 3: records may hold compressed values (record.Header.Codec),
	// which builds that read only versions 1 and 2 would take for damage. A directory is marked
	// so when it is opened with Options.Compression; it stays so.
	identityCompressedVersion = 3
)

// formatVersion is the format version the directory must have for what c may write.
func (c *Cache) formatVersion() uint32 {
	if c.opts.Compression != CompressionNone {
		return identityCompressedVersion
	}
	return identityVersion
}

// flagPerBlob marks a cache of one file per blob (Options.PerBlobFiles).
const flagPerBlob = 1

type identity struct {
	Version uint32
	Flags   uint32
	Created int64
}

func (id identity) encode() []byte {
	return identityFormat.Encode(uint64(id.Version), uint64(id.Flags), uint64(id.Created))
}

// decodeIdentity decodes an identity file. A version this build does not read is ErrCorrupt,
// and so is every damage after the magic; a wrong magic is ErrNotBlobCache.
func decodeIdentity(b []byte) (identity, error) {
	f, err := identityFormat.Decode(b)
	if errors.Is(err, cachedir.ErrMagic) {
		// Another program's file, not a damaged one of ours: ErrNotBlobCache alone (the codec's
		// error as text, not wrapped), so that nothing that tells damage by ErrCorrupt takes
		// the directory for a cache to repair.
		return identity{}, fmt.Errorf("%w: %v", ErrNotBlobCache, err)
	}
	if err != nil {
		return identity{}, err
	}
	return identity{Version: uint32(f[0]), Flags: uint32(f[1]), Created: int64(f[2])}, nil
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
