package sizeclass

import "testing"

func TestClasses(t *testing.T) {
	for _, c := range []Classes{{12, 22}, {6, 26}} {
		prev := 0
		for idx := range c.Count() {
			n := c.Size(idx)
			if i, s := c.Of(n); n <= prev || i != idx || s != n {
				t.Fatalf("%+v: class %d of size %d after %d: Of(%d) = %d, %d", c, idx, n, prev, n, i, s)
			}
			if i, _ := c.Of(prev + 1); i != idx {
				t.Fatalf("%+v: Of(%d) = %d, want %d", c, prev+1, i, idx)
			}
			if idx > 0 && n-prev > prev/4+1 {
				t.Fatalf("%+v: class %d (%d) wastes more than a fifth over %d", c, idx, n, prev)
			}
			prev = n
		}
		if i, s := c.Of(prev + 1); i != -1 || s != prev+1 {
			t.Fatalf("%+v: past the largest class: %d, %d", c, i, s)
		}
	}
}
