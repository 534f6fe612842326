package workload

import "testing"

func TestPieces(t *testing.T) {
	p := PayloadOf([]byte("abcdefghij"))
	for _, tc := range []struct {
		i    uint64
		n    int
		want string
	}{{0, 3, "abc"}, {1, 3, "def"}, {2, 3, "ghi"}, {3, 3, "abc"}, {7, 3, "def"}, {0, 10, "abcdefghij"}, {5, 10, "abcdefghij"}, {4, 2, "ij"}, {5, 2, "ab"}} {
		if got := p.Piece(tc.i, tc.n); string(got) != tc.want {
			t.Errorf("Piece(%d, %d) = %q, want %q", tc.i, tc.n, got, tc.want)
		}
	}
	if p.Pieces(3) != 3 || p.Pieces(10) != 1 || p.Len() != 10 {
		t.Errorf("Pieces(3) %d, Pieces(10) %d, Len %d; want 3, 1, 10", p.Pieces(3), p.Pieces(10), p.Len())
	}
}
