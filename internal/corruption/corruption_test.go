package corruption

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestMarker(t *testing.T) {
	kind := New("record: bad magic")
	wrapped := fmt.Errorf("segment 7 offset 4096: %w", kind)
	for _, err := range []error{kind, wrapped, fmt.Errorf("%w: detail", ErrCorrupt)} {
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v: not ErrCorrupt", err)
		}
	}
	if !errors.Is(wrapped, kind) {
		t.Error("the kind is lost in the wrapping")
	}
	ioErr := fmt.Errorf("read header: %w", io.ErrUnexpectedEOF)
	if errors.Is(ioErr, ErrCorrupt) || errors.Is(kind, New("record: bad magic")) {
		t.Error("ErrCorrupt or a kind matches what it is not")
	}
	if kind.Error() != "record: bad magic" {
		t.Errorf("text %q", kind.Error())
	}
}
