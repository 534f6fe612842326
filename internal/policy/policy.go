package policy

// Policy is everything the package decides for one cache: the eviction rules, the admission of
// Puts and the write budget.
type Policy struct {
	Rules
	// Admission decides whether an unconditional Put of a record of size bytes under key (with
	// hash) is written; nil admits every Put.
	Admission func(key []byte, hash uint64, size int64) bool
	// Budget is the write budget; nil for none.
	Budget *Budget
}

// Filters reports whether Puts go through admission or a budget at all.
func (p *Policy) Filters() bool { return p.Admission != nil || p.Budget != nil }

// Admit decides whether the unconditional Put of a record of n bytes under key (hash h) is
// written: by the admission, then by the budget (charged only if admitted).
func (p *Policy) Admit(key []byte, h uint64, n int64) bool {
	if p.Admission != nil && !p.Admission(key, h, n) {
		return false
	}
	return p.Budget == nil || p.Budget.Take(n, false)
}

// Charge counts n bytes that are written whatever the budget (a tombstone).
func (p *Policy) Charge(n int64) {
	if p.Budget != nil {
		p.Budget.Take(n, true)
	}
}

// AffordsCopy reports whether a copy of n bytes is within the budget, and charges it if so.
func (p *Policy) AffordsCopy(n int64) bool { return p.Budget == nil || p.Budget.Take(n, false) }
