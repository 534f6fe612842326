//go:build !linux

package hugemem

// advise does nothing: only Linux has transparent huge pages to ask for.
func advise([]byte) {}
