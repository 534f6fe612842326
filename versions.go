package blobcache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Every record this build writes carries a version, unique among the writes of the directory
// across reopens and crashes: the value of a memcached cas and of an HTTP ETag. Versions come
// from a counter whose high-water mark is leased from the state file: a version is handed out
// only below a bound the file holds durably, so a process that crashes never leaves versions a
// later one hands out again. Opening starts past the bound the file holds (and past the wall
// clock in nanoseconds, so versions stay above any the counter gave before a lost state file);
// a lease of Options.versionLease versions is written then, and again each time one runs out.
//
// The state file also holds the invalidation point of InvalidateAll: records with a version
// below invalidBefore, or created before invalidAt once that time has come, are misses.
//
//	0                   8                  16                      24                   32         36         40
//	+-------------------+------------------+-----------------------+--------------------+----------+----------+
//	| magic "BCSTATE\0" | leaseEnd uint64  | invalidBefore uint64  | invalidAt (unix ns)| reserved | crc32c   |
//	+-------------------+------------------+-----------------------+--------------------+----------+----------+
//
// crc32c covers bytes 0..36. Checked in order: length, magic, reserved, crc. A legacy record
// (written before versions existed) has version 0; what callers see as its version is
// legacyVersion(its creation time), above every counter value.
var stateFormat = cachedir.Format{
	Name:     "state file",
	Magic:    "BCSTATE\x00",
	Fields:   []int{8, 8, 8}, // leaseEnd, invalidBefore, invalidAt
	Reserved: 4,
}

const defaultVersionLease = 1 << 24

// versions hands out record versions and keeps the invalidation point.
type versions struct {
	last          atomic.Uint64 // the last version handed out
	leaseEnd      atomic.Uint64 // versions below it may be handed out
	invalidBefore atomic.Uint64
	invalidAt     atomic.Int64

	mu    sync.Mutex // writes of the state file
	fs    vfs.FS
	path  string
	lease uint64 // versions leased per write of the state file
	clock func() time.Time
}

type state struct {
	leaseEnd, invalidBefore uint64
	invalidAt               int64
}

func (s state) encode() []byte {
	return stateFormat.Encode(s.leaseEnd, s.invalidBefore, uint64(s.invalidAt))
}

func decodeState(b []byte) (state, error) {
	f, err := stateFormat.Decode(b)
	if err != nil {
		return state{}, err
	}
	return state{leaseEnd: f[0], invalidBefore: f[1], invalidAt: int64(f[2])}, nil
}

// open reads the state file of dir and leases the first versions. A missing file is a new
// directory (or one written before versions existed). A damaged one loses the invalidation
// point, so everything stored before now is invalidated (a cache may forget, never serve what a
// flush removed); damaged is then reported, and the cache opens. readOnly reads the file and
// leases nothing (no version is handed out).
func (v *versions) open(fsys vfs.FS, dir string, lease uint64, clock func() time.Time, readOnly bool) (damaged error, err error) {
	v.fs, v.path, v.lease, v.clock = fsys, filepath.Join(dir, stateFile), lease, clock
	now := uint64(time.Now().UnixNano())
	var st state
	b, err := cachedir.ReadFile(fsys, v.path)
	switch {
	case err == nil:
		st, damaged = decodeState(b)
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("blobcache: read %s: %w", v.path, err)
	}
	start := max(st.leaseEnd, now)
	if damaged != nil {
		st = state{invalidBefore: start, invalidAt: clock().UnixNano()}
	}
	v.last.Store(start - 1)
	v.invalidBefore.Store(st.invalidBefore)
	v.invalidAt.Store(st.invalidAt)
	if readOnly {
		return damaged, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return damaged, v.writeLocked(start + v.lease)
}

// writeLocked writes the state file with lease end end, then makes it the lease. The caller
// holds mu.
func (v *versions) writeLocked(end uint64) error {
	st := state{leaseEnd: end, invalidBefore: v.invalidBefore.Load(), invalidAt: v.invalidAt.Load()}
	if err := cachedir.Replace(v.fs, v.path, st.encode()); err != nil {
		return err
	}
	v.leaseEnd.Store(end)
	return nil
}

// next hands out a new version. It writes the state file when the lease runs out (once every
// lease versions); an error then is the write's, and no version is handed out.
func (v *versions) next() (uint64, error) {
	n := v.last.Add(1)
	if n < v.leaseEnd.Load() {
		return n, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if end := v.leaseEnd.Load(); n >= end {
		if err := v.writeLocked(n + v.lease); err != nil {
			return 0, fmt.Errorf("%w: lease record versions: %w", ErrWriteFailed, err)
		}
	}
	return n, nil
}

// invalidate makes every record stored before at a miss from at on; at not after now means
// every record stored so far, at once (the next version handed out is the first still valid).
func (v *versions) invalidate(at, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	oldBefore, oldAt := v.invalidBefore.Load(), v.invalidAt.Load()
	if !at.After(now) {
		v.invalidBefore.Store(v.last.Load() + 1)
		at = now
	}
	v.invalidAt.Store(at.UnixNano())
	if err := v.writeLocked(v.leaseEnd.Load()); err != nil {
		v.invalidBefore.Store(oldBefore)
		v.invalidAt.Store(oldAt)
		return err
	}
	return nil
}

// legacyVersion is the version callers see for a legacy record created at ctime (Unix
// nanoseconds): unique in practice (two writes of one key in the same nanosecond), above every
// counter value (which stays below 1<<63 for centuries of nanoseconds).
func legacyVersion(ctime int64) uint64 { return 1<<63 | uint64(ctime) }

// fate says whether a record is still to be served.
type fate uint8

const (
	fresh       fate = iota
	expired          // past its expiry time
	invalidated      // stored before an InvalidateAll
)

// fateOf tells what a record with these fields is at now (Unix nanoseconds; 0 when the caller
// has not read the clock yet: it is then read only if the record can expire or an invalidation
// time is set). version is the record's own (0 for a legacy record).
func (v *versions) fateOf(version uint64, ctime, expires int64, now *int64) fate {
	if version < v.invalidBefore.Load() {
		return invalidated
	}
	at := v.invalidAt.Load()
	if expires == 0 && at == 0 {
		return fresh
	}
	if *now == 0 {
		*now = v.clock().UnixNano()
	}
	if at != 0 && *now >= at && ctime < at {
		return invalidated
	}
	if expires != 0 && *now >= expires {
		return expired
	}
	return fresh
}
