package cachedir

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

// FuzzDecode: any bytes either decode to fields that Encode turns back into the very same bytes,
// or give an error that is corruption and names its kind, for the identity, state and bound layouts,
// with and without a Check. Seeded with the golden records.
func FuzzDecode(f *testing.F) {
	for _, g := range goldens {
		f.Add(unhex(f, g.hex))
	}
	f.Add([]byte("BLOBCACH"))
	f.Add([]byte("BCSTATE\x00"))
	f.Add([]byte("BCBOUND\x00"))
	f.Add([]byte{})
	versioned := identityFormat
	versioned.Check = func(fields []uint64) error {
		if fields[0] != 1 && fields[0] != 2 {
			return fmt.Errorf("format version %d", fields[0])
		}
		return nil
	}
	formats := []*Format{&identityFormat, &stateFormat, &boundFormat, &versioned}
	kinds := []error{ErrLength, ErrMagic, ErrBadField, ErrReserved, ErrChecksum}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, format := range formats {
			fields, err := format.Decode(b)
			if err != nil {
				if !errors.Is(err, corruption.ErrCorrupt) {
					t.Fatalf("%s: %x: error %v is not corruption", format.Name, b, err)
				}
				named := false
				for _, k := range kinds {
					named = named || errors.Is(err, k)
				}
				if !named {
					t.Fatalf("%s: %x: error %v has no kind", format.Name, b, err)
				}
				continue
			}
			if again := format.Encode(fields...); !bytes.Equal(again, b) {
				t.Fatalf("%s: accepted %x but re-encodes as %x", format.Name, b, again)
			}
		}
	})
}
