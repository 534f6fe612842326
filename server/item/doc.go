// Package item is the server's notion of a stored item: a payload with the memcached client
// flags and expiry time that the blob cache itself has no field for (Meta), and memcached's
// exptime conversions (ExpiresAt, TTL).
//
// The server stores the meta in the cache's record (blobcache.PutOptions) and the payload as it
// is, so a blob written through one front end (HTTP or memcached) reads back unchanged through
// the other and through the library. Builds before record metadata kept the meta in an envelope
// in front of the payload instead: a 20-byte header that starts with an 8-byte magic, for a value
// with flags or an expiry and for one that happened to start with the magic. Decode reads such a
// legacy blob (blobcache.BlobInfo.Legacy) unambiguously: it is an envelope if and only if it
// starts with the magic and is long enough for the header. Nothing writes envelopes any more.
//
// The package holds no state; its functions are safe for concurrent use.
package item
