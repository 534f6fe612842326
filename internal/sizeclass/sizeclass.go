package sizeclass

import "math/bits"

// Classes are the classes from 2^Min to 2^Max bytes (Min >= 2, Max >= Min).
type Classes struct{ Min, Max int }

// Count is the number of classes.
func (c Classes) Count() int { return 1 + (c.Max-c.Min)*4 }

// Of returns the index and the size of the smallest class of at least n bytes; the index is -1,
// and the size n, past the largest class.
func (c Classes) Of(n int) (idx, size int) {
	if n <= 1<<c.Min {
		return 0, 1 << c.Min
	}
	k := bits.Len(uint(n-1)) - 1 // 2^k < n <= 2^(k+1), k >= Min
	step := 1 << (k - 2)
	q := (n + step - 1) / step // 5..8 quarters of 2^k
	size = q * step
	if size > 1<<c.Max {
		return -1, n
	}
	return 1 + (k-c.Min)*4 + (q - 5), size
}

// Size is the size of class idx (0 <= idx < Count).
func (c Classes) Size(idx int) int {
	if idx == 0 {
		return 1 << c.Min
	}
	k := (idx-1)/4 + c.Min
	return (5 + (idx-1)%4) << (k - 2)
}
