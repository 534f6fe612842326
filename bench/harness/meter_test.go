package harness

import (
	"testing"
	"unsafe"

	"github.com/seed57392e9e/blobcache/bench/engine"
)

// bufferEngine is an engine that makes read buffers and records how many bytes it was asked for.
type bufferEngine struct {
	engine.Engine
	asked int
}

func (e *bufferEngine) ReadBuffer(n int) []byte {
	e.asked = n
	return make([]byte, n)
}

// plainEngine hides bufferEngine's ReadBuffer.
type plainEngine struct{ engine.Engine }

func TestReadBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bufSize   int
		fromEng   bool
		wantAsked int
	}{
		{"large values from the engine", 1<<20 + 1, true, 3 * (1<<20 + 4096)},
		{"small values as Go slices", 1025, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := &bufferEngine{}
			for _, eng := range []engine.Engine{be, plainEngine{}} {
				c := &child{cfg: Config{Goroutines: 3}, bufSize: tc.bufSize, eng: eng}
				bufs := c.readBuffers()
				if len(bufs) != 3 {
					t.Fatalf("%d buffers, want 3", len(bufs))
				}
				for i, b := range bufs {
					if len(b) != tc.bufSize || cap(b) != tc.bufSize {
						t.Errorf("buffer %d: len %d cap %d, want %d", i, len(b), cap(b), tc.bufSize)
					}
					b[len(b)-1] = byte(i + 1) // each buffer's last byte is its own
				}
				for i, b := range bufs {
					if b[len(b)-1] != byte(i+1) {
						t.Errorf("buffer %d overlaps another", i)
					}
				}
				if _, ok := eng.(*bufferEngine); ok && tc.fromEng {
					if d := uintptr(unsafe.Pointer(&bufs[1][0])) - uintptr(unsafe.Pointer(&bufs[0][0])); d%4096 != 0 {
						t.Errorf("buffers %d bytes apart, not a multiple of 4 KiB", d)
					}
				}
				if again := c.readBuffers(); &again[0][0] != &bufs[0][0] {
					t.Error("the buffers were made again for the next window")
				}
			}
			if be.asked != tc.wantAsked {
				t.Errorf("the engine was asked for %d bytes, want %d", be.asked, tc.wantAsked)
			}
		})
	}
}
