package httpapi

import (
	"strconv"
	"strings"
)

// acceptsZstd reports whether Accept-Encoding header values h (RFC 9110, section 12.5.3) let
// the response be zstd-encoded: zstd is listed with a non-zero quality, or "*" is and zstd is
// not listed with quality 0. Anything it cannot read it takes as not accepting.
func acceptsZstd(h []string) bool {
	star, zstd := false, -1 // zstd: -1 not listed, 0 refused, 1 accepted
	for _, v := range h {
		for item := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			ok := quality(params) > 0
			switch coding {
			case "zstd":
				if ok {
					zstd = 1
				} else {
					zstd = 0
				}
			case "*":
				star = star || ok
			}
		}
	}
	return zstd == 1 || zstd == -1 && star
}

// quality is the q parameter of an Accept-Encoding item's parameters (1 when absent, 0 when it
// cannot be read).
func quality(params string) float64 {
	for p := range strings.SplitSeq(params, ";") {
		name, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}
