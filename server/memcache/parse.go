package memcache

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strconv"
)

// MaxKeyLen is the memcached protocol's key limit.
const MaxKeyLen = 250

// maxTokens bounds the tokens of a command other than get and gets.
const maxTokens = 24

// split cuts a command line (without its line ending) into space-separated tokens, appending
// to toks.
func split(line []byte, toks [][]byte) [][]byte {
	for len(line) > 0 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			return append(toks, line)
		}
		if i > 0 {
			toks = append(toks, line[:i])
		}
		line = line[i+1:]
	}
	return toks
}

// Key errors, in memcached's words where it has them.
var (
	errBadKey    = errors.New("bad key")
	errKeyLength = errors.New("bad command line format")
	errBase64    = errors.New("error decoding key")
)

// checkKey validates a text-protocol key: 1 to MaxKeyLen bytes, none of them a space or NUL.
// protocol.txt forbids control bytes in keys, but memcached takes every byte its tokenizer does
// not split on (all but the space; the line ending ends the line), NUL aside, which its parser
// cannot hold; clients send them (memaslap's keys start with control bytes), so the server takes
// what memcached takes. Bytes from 0x80 up are allowed (memcached does not require UTF-8).
func checkKey(k []byte) error {
	if len(k) == 0 {
		return errBadKey
	}
	if len(k) > MaxKeyLen {
		return errKeyLength
	}
	for _, b := range k {
		if b == ' ' || b == 0 {
			return errBadKey
		}
	}
	return nil
}

// decodeKey decodes a meta command key: base64 when b is set, else checked like a text key.
// A base64 key may hold any bytes.
func decodeKey(k []byte, b bool) ([]byte, error) {
	if !b {
		return k, checkKey(k)
	}
	if len(k) > base64.StdEncoding.EncodedLen(MaxKeyLen) {
		return nil, errKeyLength
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(k)))
	n, err := base64.StdEncoding.Decode(out, k)
	if err != nil || n == 0 {
		return nil, errBase64
	}
	if n > MaxKeyLen {
		return nil, errKeyLength
	}
	return out[:n], nil
}

// parseUint parses a decimal token without sign.
func parseUint(t []byte, bits int) (uint64, bool) {
	if len(t) == 0 || t[0] < '0' || t[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(t), 10, bits)
	return v, err == nil
}

// parseInt parses a decimal token with an optional minus sign.
func parseInt(t []byte) (int64, bool) {
	if len(t) == 0 || t[0] == '+' {
		return 0, false
	}
	v, err := strconv.ParseInt(string(t), 10, 64)
	return v, err == nil
}

// parseLength parses a data block length: a non-negative decimal that fits in an int64.
func parseLength(t []byte) (int64, bool) {
	v, ok := parseUint(t, 63)
	return int64(v), ok
}

// parseInt32 parses a token the way memcached's safe_strtol does for exptimes and TTLs: an
// optional sign and decimal digits that fit in 64 bits, kept to their low 32 bits (memcached
// stores the result in an int32_t).
func parseInt32(t []byte) (int64, bool) {
	if len(t) > 0 && t[0] == '+' {
		t = t[1:]
		if len(t) > 0 && (t[0] == '-' || t[0] == '+') {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		return 0, false
	}
	return int64(int32(v)), true
}
