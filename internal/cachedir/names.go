package cachedir

import (
	"slices"
	"strings"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// The names of the directory's entries.
const (
	LockFile     = "LOCK"
	IdentityFile = "BLOBCACHE"
	StateFile    = "STATE"
	BloomFile    = "bloom.dat"
	IntentsFile  = "INTENTS" // the intent log (internal/intent), a file mapping
	BoundFile    = "BOUND"   // the disk bound chosen when the cache was made (Options.MaxSize)
	SegmentsDir  = "segments"
	BlobsDir     = "blobs"
	// TempSuffix ends the name of Replace's temporary file: NAME.tmp is the new NAME until
	// the rename.
	TempSuffix = ".tmp"
)

// replaced are the files the cache writes with Replace, so NAME.tmp of each is the cache's.
var replaced = []string{IdentityFile, StateFile, BloomFile, BoundFile}

// Kind is whose an entry of the directory is.
type Kind uint8

const (
	// Stray is a name the cache never gives: somebody else's file, which the cache leaves
	// where it is (and counts).
	Stray Kind = iota
	// Own is one of the cache's files or directories.
	Own
	// Temp is the temporary file of a Replace: a leftover of one a crash or an error cut
	// short when no Replace runs, which the cache may remove.
	Temp
)

func (k Kind) String() string {
	switch k {
	case Own:
		return "own"
	case Temp:
		return "temporary"
	default:
		return "stray"
	}
}

// Classify says whose the entry of the cache directory called name is.
func Classify(name string) Kind {
	switch {
	case name == LockFile || name == SegmentsDir || name == BlobsDir || name == IntentsFile || slices.Contains(replaced, name):
		return Own
	case strings.HasSuffix(name, TempSuffix) && slices.Contains(replaced, strings.TrimSuffix(name, TempSuffix)):
		return Temp
	default:
		return Stray
	}
}

// Contents is what a directory holds, as far as opening it as a cache goes.
type Contents uint8

const (
	// Empty: nothing, or only what the creation of a cache leaves before its identity file is
	// in place (the lock, the identity file's temporary file): a new cache may be made there.
	Empty Contents = iota
	// Cache: an identity file, which says what the directory is once read.
	Cache
	// Foreign: something else and no identity file: not a cache, and not to be made one.
	Foreign
)

// Survey lists dir and says what it holds. For Foreign, entry is the name of an entry a new
// cache would not have. An error is the file system's, as it came (it names dir).
func Survey(fsys vfs.FS, dir string) (what Contents, entry string, err error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return Empty, "", err
	}
	for _, e := range ents {
		if e.Name() == IdentityFile {
			return Cache, "", nil
		}
	}
	for _, e := range ents {
		if e.Name() != LockFile && e.Name() != IdentityFile+TempSuffix {
			return Foreign, e.Name(), nil
		}
	}
	return Empty, "", nil
}
