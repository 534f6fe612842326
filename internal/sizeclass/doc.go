// Package sizeclass is the size classes buffers are kept and reused by: 2^Min bytes, then four
// classes a power of two (2^k·5/4, ·6/4, ·7/4 and 2^(k+1)) up to 2^Max bytes. A buffer of its
// class's size wastes at most a fifth of it on the bytes asked for (past the smallest class);
// classes are numbered from 0 in growing size, so a class's index can address an array of pools.
package sizeclass
