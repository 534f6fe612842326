package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Zipf describes a synthetic trace: Requests requests over Objects objects, object of rank k
// (1-based) drawn with probability proportional to 1/k^Alpha. Each object has one size for the
// whole trace: Size when SizeMax is 0, otherwise lognormal, clamped to [SizeMin, SizeMax], with
// its median at the geometric middle of the range and sigma a sixth of ln(SizeMax/SizeMin), so
// that the range is the median ±3 sigma (1 KiB–1 MiB: median 32 KiB, mean about 60 KiB).
//
// Object ids are ranks, 1 being the most popular. Generate is a pure function of the fields.
type Zipf struct {
	Alpha    float64
	Objects  int
	Requests int
	Size     uint32 // fixed size, when SizeMax is 0
	SizeMin  uint32 // lognormal sizes, when SizeMax > 0
	SizeMax  uint32
	Seed     uint64
}

// Validate reports whether z can be generated.
func (z Zipf) Validate() error {
	switch {
	case z.Alpha < 0 || math.IsNaN(z.Alpha):
		return fmt.Errorf("trace: zipf alpha %v is negative", z.Alpha)
	case z.Objects < 1 || z.Requests < 1:
		return fmt.Errorf("trace: zipf needs objects and requests, got %d and %d", z.Objects, z.Requests)
	case z.SizeMax == 0 && z.Size == 0:
		return fmt.Errorf("trace: zipf object size is 0")
	case z.SizeMax > 0 && (z.SizeMin == 0 || z.SizeMin > z.SizeMax):
		return fmt.Errorf("trace: zipf lognormal sizes [%d, %d] are not a range", z.SizeMin, z.SizeMax)
	}
	return nil
}

// Generate draws the trace. math/rand/v2's Zipf needs an exponent above 1, and the workloads of
// interest (0.6–1.0) are below: this one searches the cumulative weights (8 bytes an object).
func (z Zipf) Generate() ([]Request, error) {
	if err := z.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(z.Seed, z.Seed^0x9e3779b97f4a7c15))
	sizes := z.sizes(rng)
	cdf := make([]float64, z.Objects)
	var sum float64
	for k := range cdf {
		sum += math.Pow(float64(k+1), -z.Alpha)
		cdf[k] = sum
	}
	reqs := make([]Request, z.Requests)
	for i := range reqs {
		k := sort.SearchFloat64s(cdf, rng.Float64()*sum)
		k = min(k, z.Objects-1) // rounding at the top end
		reqs[i] = Request{ID: uint64(k + 1), Size: sizes(k), Time: uint32(i)}
	}
	return reqs, nil
}

// sizes returns the size of the object of 0-based rank k.
func (z Zipf) sizes(rng *rand.Rand) func(k int) uint32 {
	if z.SizeMax == 0 {
		return func(int) uint32 { return z.Size }
	}
	lo, hi := math.Log(float64(z.SizeMin)), math.Log(float64(z.SizeMax))
	mu, sigma := (lo+hi)/2, (hi-lo)/6
	s := make([]uint32, z.Objects)
	for k := range s {
		v := math.Exp(mu + sigma*rng.NormFloat64())
		s[k] = uint32(min(max(math.Round(v), float64(z.SizeMin)), float64(z.SizeMax)))
	}
	return func(k int) uint32 { return s[k] }
}
