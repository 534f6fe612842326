// Package errorfs is a [vfs.FS] that injects faults into the file system it
// wraps, so tests reach the engine's error paths through the same seam real
// faults take: I/O errors (EIO, ENOSPC or any errno) on chosen operations,
// short and torn writes, bits flipped in bytes read or written, a sync that
// lies, a disk of limited capacity, and a power loss.
//
// A [Fault] says which operations it hits (an [Op] mask), on which files (a
// glob on the base name) and which bytes of them (a range), how many matching
// operations it lets through first (Skip), how many it hits at most (Times),
// with what probability (Prob, drawn from the FS's seeded generator), and
// what it does (an [Action]). Faults are consulted in the order they were
// added; the first one that fires decides. Every fired fault is counted, on
// the Fault and on the FS, so a test can say how many faults it injected.
//
// The capacity model (SetCapacity) charges each file the highest byte ever
// written or allocated in it (truncation gives the bytes back, removal gives
// the file's bytes back at once, even while it is still open; punched holes
// are not given back). Past the capacity a write or Allocate fails whole
// with ENOSPC. It is a model of a full disk, not of a file system's
// allocator.
//
// The power-loss model (TrackUnsynced, PowerLoss; see power.go) remembers
// what every change since a file's last Sync replaced, and which files were
// created since their directory's last SyncDir; after a crash it rolls the
// files back to a state a power loss could leave: changes up to a random
// point kept, later ones undone, 512-byte sectors torn, never-synced
// directory entries gone.
//
// Invariants kept for the code under test: a write or read that moves fewer
// bytes than asked returns a non-nil error (the vfs contract), and an
// operation a fault fails is not performed at all unless its Action says
// part of it is (Short, Tear).
//
// Concurrency: an FS and the files it opens are safe for concurrent use, like
// the FS they wrap. Faults may be added and removed while files are in use;
// a Fault's fields must not change after Add.
package errorfs
