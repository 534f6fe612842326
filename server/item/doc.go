// Package item is the server's encoding of a stored value: the bytes a client sent, plus the
// memcached client flags and expiry time that the blob cache itself has no field for.
//
// A value with no flags and no expiry is stored as is, so a blob written through one front end
// (HTTP or memcached) reads back unchanged through the other and through the library. Anything
// else is stored behind a 20-byte header that starts with an 8-byte magic. A value that happens to
// start with the magic is always stored behind a header, so a stored blob is read unambiguously:
// it is an envelope if and only if it starts with the magic and is long enough for the header.
//
// The package holds no state; its functions are safe for concurrent use.
package item
