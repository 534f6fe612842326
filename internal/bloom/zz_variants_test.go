package bloom

import "testing"

var varKeys = []uint64{4096, 1 << 20}

func BenchmarkVarCur(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.Test(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarE(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testE2(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarE3(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testE3(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarF(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testF(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarG(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testG(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarV1(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testV1(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarV2(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testV2(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarH(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testH(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}

func BenchmarkVarI(b *testing.B) {
	for _, keys := range varKeys {
		fx := fixture(keys)
		for _, c := range []struct {
			name string
			hs   []uint64
		}{{"hit", fx.hits}, {"miss", fx.miss}} {
			b.Run(c.name, func(b *testing.B) {
				f, hs := fx.f, c.hs
				n := 0
				for i := 0; i < b.N; i++ {
					if f.testI(hs[i&(tableSize-1)]) {
						n++
					}
				}
				sink.Add(int64(n))
			})
		}
	}
}
