package torture

import (
	"fmt"
	"strings"
)

// State is what a key holds: the value of a Put (named by its version), or nothing.
type State struct {
	Present bool
	Version uint64 // of the Put whose value the key holds; 0 when not Present
}

func (s State) String() string {
	if !s.Present {
		return "absent"
	}
	return fmt.Sprintf("v%d", s.Version)
}

// op is one Put or Delete of a key, in the order the writer called them.
type op struct {
	del     bool
	version uint64
	acked   int // log position of its OK entry, -1 if it never returned nil
}

func (o op) state() State {
	if o.del {
		return State{}
	}
	return State{Present: true, Version: o.version}
}

// History is what one run of the writer did, rebuilt from its log.
type History struct {
	ops map[uint32][]op
	// durableAt is the log position of the Begin of the last Drain that returned: every
	// operation acknowledged before it is durable.
	durableAt int
	// deletesDurable: a Delete is durable once it returns (the cache syncs it).
	deletesDurable bool

	Entries    int      // log entries read
	Puts       int      // Puts acknowledged
	Deletes    int      // Deletes acknowledged
	Failed     int      // operations that returned an error
	Drains     int      // Drains that returned
	Ready      bool     // the cache opened before the writer was killed
	MaxVersion uint64   // the highest version or drain number used
	Mismatches []string // what the writer itself read and must not have
}

// NewHistory rebuilds a run from its log entries. deletesDurable says a Delete is durable as
// soon as it returns (BlobCache with Fsync).
func NewHistory(entries []Entry, deletesDurable bool) (*History, error) {
	h := &History{ops: make(map[uint32][]op), durableAt: -1, deletesDurable: deletesDurable, Entries: len(entries)}
	drains := make(map[uint64]int) // drain number -> position of its Begin
	for pos, e := range entries {
		h.MaxVersion = max(h.MaxVersion, e.Version)
		switch e.Kind {
		case PutBegin, DelBegin:
			ops := h.ops[e.Key]
			if n := len(ops); n > 0 && ops[n-1].version >= e.Version {
				return nil, fmt.Errorf("torture: log entry %d: %v of key %d version %d after version %d",
					pos, e.Kind, e.Key, e.Version, ops[n-1].version)
			}
			h.ops[e.Key] = append(ops, op{del: e.Kind == DelBegin, version: e.Version, acked: -1})
		case PutOK, DelOK, PutFail, DelFail:
			ops := h.ops[e.Key]
			n := len(ops)
			if n == 0 || ops[n-1].version != e.Version || ops[n-1].del != (e.Kind == DelOK || e.Kind == DelFail) {
				return nil, fmt.Errorf("torture: log entry %d: %v of key %d version %d without its begin", pos, e.Kind, e.Key, e.Version)
			}
			switch e.Kind {
			case PutOK:
				ops[n-1].acked = pos
				h.Puts++
			case DelOK:
				ops[n-1].acked = pos
				h.Deletes++
			default:
				h.Failed++
			}
		case DrainBegin:
			drains[e.Version] = pos
		case DrainOK:
			begin, ok := drains[e.Version]
			if !ok {
				return nil, fmt.Errorf("torture: log entry %d: drain %d returned without its begin", pos, e.Version)
			}
			h.durableAt = max(h.durableAt, begin)
			h.Drains++
		case Ready:
			h.Ready = true
		case Mismatch:
			h.Mismatches = append(h.Mismatches, fmt.Sprintf("key %d: the writer read v%d", e.Key, e.Version))
		}
	}
	return h, nil
}

// Keys calls fn for every key the run wrote.
func (h *History) Keys(fn func(key uint32)) {
	for k := range h.ops {
		fn(k)
	}
}

// Allowed returns the states key may be in after a power loss, given the state it had before
// the run (base): what is durable may not be lost, but what was acknowledged since may be (and a
// miss then, for a write whose intent outlived it). See the package documentation for the rule.
func (h *History) Allowed(key uint32, base State) []State {
	ops := h.ops[key]
	d := last(ops, h.durable)
	allowed := statesFrom(ops, d, base)
	for _, o := range ops[d+1:] {
		if o.acked >= 0 && !o.del {
			allowed = appendNew(allowed, State{}) // a newer acknowledged write was lost
			break
		}
	}
	return allowed
}

// last is the index of the last of ops that is, -1 if none is.
func last(ops []op, is func(op) bool) int {
	i := -1
	for j, o := range ops {
		if is(o) {
			i = j
		}
	}
	return i
}

// statesFrom is the states of ops[i:] (i >= 0), or of base and every op (i < 0).
func statesFrom(ops []op, i int, base State) []State {
	var states []State
	if i < 0 {
		states, i = append(states, base), 0
	}
	for _, o := range ops[i:] {
		states = append(states, o.state())
	}
	return states
}

// appendNew appends s to states unless it is there already.
func appendNew(states []State, s State) []State {
	for _, x := range states {
		if x == s {
			return states
		}
	}
	return append(states, s)
}

func (h *History) durable(o op) bool {
	return o.acked >= 0 && (o.acked < h.durableAt || (o.del && h.deletesDurable))
}

// AllowedAfterCrash returns the states key may be in after a crash of the process alone (the
// kernel keeps what it was given), given its state before the run (base): the last operation
// acknowledged, or one begun after it; a miss if that operation is a Put that is not durable (a
// cache may forget it) or a later one was in flight (which replaced it, or made it forgotten);
// never an older value. With no operation acknowledged, base or any operation begun (or a miss,
// if one was).
func (h *History) AllowedAfterCrash(key uint32, base State) []State {
	ops := h.ops[key]
	a := last(ops, func(o op) bool { return o.acked >= 0 })
	allowed := statesFrom(ops, a, base)
	if a >= 0 && !ops[a].del && !h.durable(ops[a]) || len(ops) > a+1 {
		// Not durable, or a later write was in flight: its intent may have made recovery
		// forget the acknowledged value.
		allowed = appendNew(allowed, State{})
	}
	return allowed
}

// Durable reports whether the last durable operation on key fixes what the key must hold (no
// later operation was begun), so that a miss of a Put there is lost data, not a choice.
func (h *History) Durable(key uint32) bool {
	ops := h.ops[key]
	if len(ops) == 0 {
		return false
	}
	o := ops[len(ops)-1]
	return o.acked >= 0 && (o.acked < h.durableAt || (o.del && h.deletesDurable))
}

// Check returns an error if got is not a state key may be in after a power loss (Allowed).
// evicting says the cache may have evicted anything, so that a miss is always allowed.
func (h *History) Check(key uint32, base, got State, evicting bool) error {
	return check(key, base, got, evicting, h.Allowed(key, base))
}

// CheckAfterCrash returns an error if got is not a state key may be in after a crash of the
// process (AllowedAfterCrash).
func (h *History) CheckAfterCrash(key uint32, base, got State, evicting bool) error {
	return check(key, base, got, evicting, h.AllowedAfterCrash(key, base))
}

func check(key uint32, base, got State, evicting bool, allowed []State) error {
	if !got.Present && evicting {
		return nil
	}
	for _, a := range allowed {
		if a == got {
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = a.String()
	}
	return fmt.Errorf("key %d is %v; allowed: %s (state before the run %v)", key, got, strings.Join(names, ", "), base)
}

// Ops describes the operations logged on key, for a failure's message.
func (h *History) Ops(key uint32) string {
	var b strings.Builder
	for _, o := range h.ops[key] {
		kind := "put"
		if o.del {
			kind = "del"
		}
		fmt.Fprintf(&b, " %s v%d acked@%d durable=%v;", kind, o.version, o.acked, h.durable(o))
	}
	return fmt.Sprintf("%s (durable at %d)", b.String(), h.durableAt)
}
