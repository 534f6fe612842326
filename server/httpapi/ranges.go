package httpapi

import (
	"strconv"
	"strings"
)

type rangeResult int

const (
	rangeIgnored       rangeResult = iota // malformed or several ranges: answer with the whole blob
	rangeOK                               // one satisfiable range
	rangeUnsatisfiable                    // 416
)

// parseRange reads a Range header for a blob of size bytes. It serves one range; a header
// asking for several, or one it cannot parse, is ignored, as RFC 9110 §14.2 allows, and the
// whole blob is sent.
func parseRange(h string, size int64) (off, n int64, res rangeResult) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, rangeIgnored
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, 0, rangeIgnored
	}
	if first == "" {
		// Suffix: the last n bytes.
		k, ok := parseDigits(last)
		if !ok {
			return 0, 0, rangeIgnored
		}
		if k == 0 || size == 0 {
			return 0, 0, rangeUnsatisfiable
		}
		k = min(k, size)
		return size - k, k, rangeOK
	}
	s, ok := parseDigits(first)
	if !ok {
		return 0, 0, rangeIgnored
	}
	e := size - 1
	if last != "" {
		if e, ok = parseDigits(last); !ok || e < s {
			return 0, 0, rangeIgnored
		}
		e = min(e, size-1)
	}
	if s >= size {
		return 0, 0, rangeUnsatisfiable
	}
	return s, e - s + 1, rangeOK
}

// parseDigits parses a non-negative decimal without sign or spaces.
func parseDigits(s string) (int64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// ifRange reports whether a Range header applies under an If-Range header: no If-Range, or an
// If-Range naming the current strong ETag. (A date is not taken as a validator: Last-Modified
// has a resolution of a second, too coarse to be strong, so the whole blob is sent.)
func ifRange(h, etag string) bool {
	if h == "" {
		return true
	}
	return etag != "" && strings.TrimSpace(h) == etag
}
