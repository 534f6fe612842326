// Package corruption is the one marker of damaged bytes on disk. Every package that decodes
// bytes from disk returns errors that errors.Is finds to be ErrCorrupt when the bytes fail their
// checks (a bad magic, length or checksum), and errors that are not when the trouble is
// elsewhere (an I/O error, a file that is absent or of a newer format). Recovery tells damage,
// which it repairs or forgets, from every other failure, which it reports, by ErrCorrupt alone.
package corruption
