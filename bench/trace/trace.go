package trace

import "errors"

// ErrFormat is wrapped by every error about a malformed trace file.
var ErrFormat = errors.New("trace: malformed trace")

// Request is one request of a trace: an object and its size. Time is the trace's own clock
// (seconds in libCacheSim's traces, the request's index in generated ones); the replay ignores
// it.
type Request struct {
	ID   uint64
	Size uint32
	Time uint32
}

// Summary describes a trace as the hit-ratio tables need it.
type Summary struct {
	Requests     int   // requests of size > 0: the ones a replay counts
	ZeroSize     int   // requests of size 0, skipped by the replay (and by libCacheSim)
	Objects      int   // distinct objects among the counted requests
	UniqueBytes  int64 // sum over objects of the size at the object's first request
	RequestBytes int64 // sum of the counted requests' sizes
	MaxSize      uint32
}

// Summarize returns the trace's summary. An object's size is taken from its first request, as
// libCacheSim's working-set size is, when a trace gives one object several sizes.
func Summarize(reqs []Request) Summary {
	var s Summary
	seen := make(map[uint64]struct{}, len(reqs)/4)
	for _, r := range reqs {
		if r.Size == 0 {
			s.ZeroSize++
			continue
		}
		s.Requests++
		s.RequestBytes += int64(r.Size)
		s.MaxSize = max(s.MaxSize, r.Size)
		if _, ok := seen[r.ID]; !ok {
			seen[r.ID] = struct{}{}
			s.UniqueBytes += int64(r.Size)
		}
	}
	s.Objects = len(seen)
	return s
}
