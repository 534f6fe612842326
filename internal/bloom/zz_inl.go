package bloom

func (f *Filter) testE(h uint64) bool {
	blk := f.bits.Block(f.block(h))
	x, ok := h, uint64(1)
	for range f.k {
		x *= mix
		ok &= blk[x>>61].Load() >> (x >> 55 & 63)
	}
	return ok&1 != 0
}

func (f *Filter) testE2(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x, ok := h, uint64(1)
	for range f.k {
		x *= mix
		ok &= blk[x>>61].Load() >> (x >> 55 & 63)
	}
	return ok&1 != 0
}

func (f *Filter) testE3(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x, miss := h, uint64(0)
	for range f.k {
		x *= mix
		miss |= ^blk[x>>61].Load() >> (x >> 55 & 63)
	}
	return miss&1 == 0
}

func (f *Filter) testG(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x := h
	for range f.k {
		x *= mix
		if blk[x>>61].Load()&(1<<(x>>55&63)) == 0 {
			return false
		}
	}
	return true
}

func (f *Filter) testF(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x, ok := h*mix, uint64(1)
	for range f.k {
		w := blk[x>>61].Load()
		x = x<<9 | x>>55
		ok &= w >> (x & 63)
	}
	return ok&1 != 0
}

func (f *Filter) testV1(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	return blk[0].Load()&1 != 0
}

func (f *Filter) testV2(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	ok := uint64(1)
	for i := range f.k {
		ok &= blk[i&7].Load() >> (h & 63)
	}
	return ok&1 != 0
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func (f *Filter) testH(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x, ok := h, uint64(1)
	for range f.k {
		x *= mix
		ok &= b2u(blk[x>>61].Load()&(1<<(x>>55&63)) != 0)
	}
	return ok != 0
}

func (f *Filter) testI(h uint64) bool {
	blk := f.bits.Block(int((h >> 32) * f.nblocks >> 32))
	x, ok := h*mix, uint64(1)
	for range f.k {
		ok &= b2u(blk[x>>61].Load()&(1<<(x>>55&63)) != 0)
		x <<= 9
	}
	return ok != 0
}
