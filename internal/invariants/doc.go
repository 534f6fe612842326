// Package invariants says whether expensive internal assertions are on: in builds with the
// invariants or race tag (so every `go test -race` run checks them), as Pebble does. Code
// guards its checks with `if invariants.Enabled`; in other builds the constant folds them away.
package invariants
