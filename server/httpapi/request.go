package httpapi

import "bytes"

// The fast path's request parser (fast.go). It reads only what it is sure to read as net/http
// would, and leaves everything else to net/http: parseRequest either takes a request whole, or
// says the connection should go to net/http, which then reads the same bytes from the start.
// It never answers a request net/http would have answered differently (TestFastPathMatchesNetHTTP).

// fastRequest is a request the fast path serves: a GET or HEAD of a blob, of the whole blob or
// a Range, with no precondition or content coding to negotiate.
type fastRequest struct {
	head   bool   // HEAD, else GET
	key    []byte // the blob's key, a subslice of the buffer parsed
	auth   []byte // the Authorization header's value; nil if none
	ranges []byte // the Range header's value; nil if none
	close  bool   // the client asked to close the connection after the response
}

// parseResult is what parseRequest made of the buffered bytes.
type parseResult int

const (
	parsed     parseResult = iota // a request the fast path serves
	incomplete                    // no whole header block in the buffer
	handOff                       // a request for net/http
)

// parseRequest parses the request at the start of b, whose header block must lie whole in b:
// it returns the request and the bytes it took, or says why it does not (incomplete: no blank
// line ends a header block in b; handOff: anything the fast path does not serve, or that is
// not plainly well-formed). maxKeyLen bounds the key, as Handler's does.
func parseRequest(b []byte, maxKeyLen int) (req fastRequest, n int, res parseResult) {
	end := bytes.Index(b, crlfcrlf)
	if end < 0 {
		return req, 0, incomplete
	}
	n = end + len(crlfcrlf)
	block := b[:end+2] // each line with its CRLF
	line, rest, _ := bytes.Cut(block, crlf)
	if !parseRequestLine(line, &req, maxKeyLen) {
		return req, 0, handOff
	}
	hosts := 0
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := bytes.Cut(line, colon)
		if !ok || len(name) == 0 || !isToken(name) || !isFieldValue(value) {
			return req, 0, handOff // also a continuation line (obs-fold), whose name is not a token
		}
		value = bytes.Trim(value, " \t")
		switch headerKind(name) {
		case hdrHost:
			hosts++
			if hosts > 1 || !isHostValue(value) {
				return req, 0, handOff
			}
		case hdrConnection:
			switch {
			case bytes.EqualFold(value, []byte("close")):
				req.close = true
			case bytes.EqualFold(value, []byte("keep-alive")):
			default:
				return req, 0, handOff
			}
		case hdrAuthorization:
			if req.auth != nil {
				return req, 0, handOff
			}
			req.auth = value
		case hdrRange:
			if req.ranges != nil {
				return req, 0, handOff
			}
			req.ranges = value
		case hdrAcceptEncoding:
			// A client that may take the stored zstd form goes to net/http, which negotiates it.
			if containsFold(value, "zstd") || bytes.IndexByte(value, '*') >= 0 {
				return req, 0, handOff
			}
		case hdrOther:
		default: // a header that changes what is answered or how the request is read
			return req, 0, handOff
		}
	}
	if hosts != 1 {
		return req, 0, handOff
	}
	return req, n, parsed
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
	colon    = []byte(":")
)

// parseRequestLine parses "GET /v1/blobs/<key> HTTP/1.1" (or HEAD) into req. The target must be
// a plain path under BlobPrefix: no query, no percent-encoding, only the characters RFC 3986
// allows in a path segment, so that the key is the path's bytes as net/http decodes them.
func parseRequestLine(line []byte, req *fastRequest, maxKeyLen int) bool {
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return false
	}
	switch string(method) {
	case "GET":
	case "HEAD":
		req.head = true
	default:
		return false
	}
	target, proto, ok := bytes.Cut(rest, []byte(" "))
	if !ok || string(proto) != "HTTP/1.1" || !bytes.HasPrefix(target, []byte(BlobPrefix)) {
		return false
	}
	key := target[len(BlobPrefix):]
	if len(key) == 0 || len(key) > maxKeyLen {
		return false
	}
	for _, c := range key {
		if !isPathChar(c) {
			return false
		}
	}
	req.key = key
	return true
}

// isPathChar reports whether c may appear as itself in a path segment (RFC 3986 pchar, less
// the percent-encoding) or separate segments.
func isPathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@', '/':
		return true
	}
	return false
}

// isToken reports whether b is an RFC 9110 token, as a header name must be.
func isToken(b []byte) bool {
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isFieldValue reports whether b holds only what a header value may: visible characters,
// spaces and tabs (no control character, no byte past ASCII: net/http's own rules for those are
// left to it).
func isFieldValue(b []byte) bool {
	for _, c := range b {
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// isHostValue reports whether b is a plain host[:port]: letters, digits, '.', '-', ':' and the
// brackets of an IPv6 literal.
func isHostValue(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == ':' || c == '[' || c == ']':
		default:
			return false
		}
	}
	return true
}

func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if bytes.EqualFold(b[i:i+len(s)], []byte(s)) {
			return true
		}
	}
	return false
}

// header kinds the fast path tells apart.
const (
	hdrOther = iota
	hdrHost
	hdrConnection
	hdrAuthorization
	hdrAcceptEncoding
	hdrRange
	hdrHandOff
)

// handOffHeaders change what a GET or HEAD answers, or how the request is read: a request with
// any of them goes to net/http.
var handOffHeaders = []string{
	"If-Range", "If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since",
	"Expect", "Transfer-Encoding", "Content-Length", "Upgrade", "Te", "Trailer", "Http2-Settings",
}

func headerKind(name []byte) int {
	switch {
	case bytes.EqualFold(name, []byte("Host")):
		return hdrHost
	case bytes.EqualFold(name, []byte("Connection")):
		return hdrConnection
	case bytes.EqualFold(name, []byte("Authorization")):
		return hdrAuthorization
	case bytes.EqualFold(name, []byte("Accept-Encoding")):
		return hdrAcceptEncoding
	case bytes.EqualFold(name, []byte("Range")):
		return hdrRange
	}
	for _, h := range handOffHeaders {
		if bytes.EqualFold(name, []byte(h)) {
			return hdrHandOff
		}
	}
	return hdrOther
}
