//go:build !invariants && !race

package invariants

// Enabled is true in builds with the invariants or race build tag.
const Enabled = false
