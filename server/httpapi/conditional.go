package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// The conditional requests of RFC 9110 section 13 on PUT and DELETE: If-Match, If-None-Match,
// If-Unmodified-Since and If-Modified-Since are evaluated against the key's current blob, and
// the write is then made conditional on that very blob (its version, or its absence), so a
// write that lands in between fails the request with 412 instead of being overwritten.

// current is what a conditional write found under its key.
type current struct {
	present  bool
	version  uint64
	modified time.Time
}

// etagOf is the entity tag of version v (see ETag).
func etagOf(v uint64) string { return `"` + strconv.FormatUint(v, 16) + `"` }

// parseETag returns the version of a strong entity tag made by ETag, of either representation
// (the value, or its stored zstd form): a precondition is on the blob's version.
func parseETag(tag string) (uint64, bool) {
	tag = strings.TrimSpace(tag)
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, false
	}
	hex := strings.TrimSuffix(tag[1:len(tag)-1], zstdTagSuffix)
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}

// matchList reports whether the If-Match or If-None-Match list h matches the current blob: "*"
// matches any present blob; a tag matches the blob with its version (weak tags compare weakly,
// as If-None-Match wants; If-Match never gets a match from a weak tag: strong says the caller).
func matchList(h string, cur current, strong bool) bool {
	if strings.TrimSpace(h) == "*" {
		return cur.present
	}
	for tag := range strings.SplitSeq(h, ",") {
		tag = strings.TrimSpace(tag)
		if weak, ok := strings.CutPrefix(tag, "W/"); ok {
			if strong {
				continue
			}
			tag = weak
		}
		if v, ok := parseETag(tag); ok && cur.present && v == cur.version {
			return true
		}
	}
	return false
}

// conditional reports whether r carries a precondition for a write.
func conditional(r *http.Request) bool {
	for _, h := range []string{"If-Match", "If-None-Match", "If-Unmodified-Since", "If-Modified-Since"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// writeAllowed evaluates the preconditions of write request r against cur, in the order RFC
// 9110 section 13.2.2 gives.
func writeAllowed(r *http.Request, cur current) bool {
	if h := r.Header.Get("If-Match"); h != "" {
		if !matchList(h, cur, true) {
			return false
		}
	} else if h := r.Header.Get("If-Unmodified-Since"); h != "" {
		if t, err := http.ParseTime(h); err == nil && (!cur.present || cur.modified.Truncate(time.Second).After(t)) {
			return false
		}
	}
	if h := r.Header.Get("If-None-Match"); h != "" {
		if matchList(h, cur, false) {
			return false
		}
	} else if h := r.Header.Get("If-Modified-Since"); h != "" {
		if t, err := http.ParseTime(h); err == nil && cur.present && !cur.modified.Truncate(time.Second).After(t) {
			return false
		}
	}
	return true
}

// readAllowed evaluates If-Match and If-Unmodified-Since of a GET or HEAD against cur (a
// failure is 412).
func readAllowed(r *http.Request, cur current) bool {
	if h := r.Header.Get("If-Match"); h != "" {
		return matchList(h, cur, true)
	}
	if h := r.Header.Get("If-Unmodified-Since"); h != "" {
		if t, err := http.ParseTime(h); err == nil && cur.modified.Truncate(time.Second).After(t) {
			return false
		}
	}
	return true
}

// notModified evaluates If-None-Match, or else If-Modified-Since, of a GET or HEAD against cur
// (true: 304).
func notModified(r *http.Request, cur current) bool {
	if h := r.Header.Get("If-None-Match"); h != "" {
		return matchList(h, cur, false)
	}
	if h := r.Header.Get("If-Modified-Since"); h != "" {
		if t, err := http.ParseTime(h); err == nil && !cur.modified.Truncate(time.Second).After(t) {
			return true
		}
	}
	return false
}

// look finds the key's current blob for a conditional write.
func (h *Handler) look(key []byte) (current, error) {
	info, err := h.st.Cache().Stat(key)
	if errors.Is(err, blobcache.ErrNotFound) {
		return current{}, nil
	}
	if err != nil {
		return current{}, err
	}
	return current{present: true, version: info.Version, modified: info.Created}, nil
}

// precondition is the library precondition that makes a write happen only on cur.
func (cur current) precondition() blobcache.Precondition {
	if cur.present {
		return blobcache.IfVersion(cur.version)
	}
	return blobcache.IfAbsent()
}

// failedPrecondition reports whether err is a write refused because the key's blob changed.
func failedPrecondition(err error) bool {
	return errors.Is(err, blobcache.ErrExists) || errors.Is(err, blobcache.ErrNotFound) ||
		errors.Is(err, blobcache.ErrConflict)
}

// lastModified is the Last-Modified of an item.
func lastModified(info store.Info) string { return info.Created.UTC().Format(http.TimeFormat) }

// A blob's HTTP attributes are kept with it (store.PutAttrs) as header lines, "Name: value\n".
// Only Content-Type is kept for now.

// requestAttrs are the attributes a PUT stores: its Content-Type, unless it is the default.
func requestAttrs(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == defaultContentType {
		return "", nil
	}
	attrs := "Content-Type: " + ct + "\n"
	if len(attrs) > blobcache.MaxAttrLen {
		return "", fmt.Errorf("Content-Type of %d bytes: at most %d are kept", len(ct), blobcache.MaxAttrLen-len("Content-Type: \n"))
	}
	return attrs, nil
}

// defaultContentType is what a blob stored without one is served as.
const defaultContentType = "application/octet-stream"

// contentType is the Content-Type kept in attrs, or the default.
func contentType(attrs string) string {
	for line := range strings.Lines(attrs) {
		if v, ok := strings.CutPrefix(line, "Content-Type: "); ok {
			return strings.TrimSuffix(v, "\n")
		}
	}
	return defaultContentType
}
