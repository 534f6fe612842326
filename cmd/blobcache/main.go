// Command blobcache is the command-line front of the BlobCache library.
//
//	blobcache put     [--dir D] [--ttl DURATION] [--segment-size SIZE] KEY [FILE]
//	blobcache get     [--dir D] KEY
//	blobcache del     [--dir D] KEY
//	blobcache stat    [--dir D]
//	blobcache verify  [--dir D]
//	blobcache serve   [--dir D] [flags]
//	blobcache version
//
// Reading commands (get, stat, verify) never create a cache and change nothing on disk: they open
// it read-only. Exit status: 0 ok, 1 a miss or a failure, 2 a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache"
)

const usage = `usage: blobcache <command> [--dir D] [args]

commands:
  put     [--dir D] [--ttl DURATION] [--segment-size SIZE] KEY [FILE]
                              store FILE (or standard input) under KEY; creates the cache if needed
  get     [--dir D] KEY       write the blob stored under KEY to standard output
  del     [--dir D] KEY       delete KEY (a directory with no cache stays as it is)
  stat    [--dir D]           print segments, blobs, bytes, bloom fill and estimated FPR
  verify  [--dir D]           read every record and checksum; exit 1 on corruption
  serve   [--dir D] [flags]   serve HTTP and the memcached protocol on 127.0.0.1 (serve -h)
  version                     print the version of this build

get, stat and verify read the cache without changing it: they never create one ("no cache at
D") and change nothing on disk, so they work on a read-only directory. get and stat open it
read-only, which a writer (put, del, serve) holding it open refuses; verify reads its files
directly and runs beside a writer too. Only put and serve create a cache. "blobcache <command>
-h" shows a command's flags.

The default directory is $BLOBCACHE_DIR, or ./blobcache-data.

exit status: 0 ok, 1 a miss (get of a missing key) or a failure, 2 a usage error.
`

// commandArgs are the arguments of each command after its flags, for its usage line.
var commandArgs = map[string]string{
	"put": "KEY [FILE]", "get": "KEY", "del": "KEY", "stat": "", "verify": "",
}

// commandHelp is what a command's -h says under its usage line.
var commandHelp = map[string]string{
	"put": `Stores FILE, or standard input, under KEY, creating the cache if the directory has none.
A value can be as large as a segment allows: about the segment size (256 MiB by default) less
the room its footer keeps; --segment-size raises it (up to 4 GiB) for the segments this put
creates.
`,
	"get":    "Writes the blob stored under KEY to standard output; exit 1 if there is none.\n",
	"del":    "Deletes KEY (durably: the cache is synced before del returns).\n",
	"stat":   "Prints the cache's counters. Read-only.\n",
	"verify": "Reads every record and checks its checksums; exit 1 on corruption. Read-only.\n",
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		var ex exitError
		if errors.As(err, &ex) {
			os.Exit(int(ex)) // run has already said why
		}
		report(os.Stderr, err)
		os.Exit(1)
	}
}

// report prints err for the user behind one "blobcache:" prefix: the library's errors carry it
// too, at every level they wrap ("blobcache: blobcache: directory is locked"), which says
// nothing twice as well as once.
func report(w io.Writer, err error) {
	fmt.Fprintln(w, "blobcache:", strings.ReplaceAll(err.Error(), "blobcache: ", ""))
}

// exitError is an exit status whose cause run has already reported (usage errors are 2, a
// verify that found corruption is 1); main exits with it and prints nothing more.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func defaultDir() string {
	if d := os.Getenv("BLOBCACHE_DIR"); d != "" {
		return d
	}
	return "blobcache-data"
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage) // a usage error
		return exitError(2)
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage) // asked for: the answer, on standard output
		return nil
	}
	cmd := args[0]
	switch cmd {
	case "serve":
		return serveCommand(args[1:], stdout, stderr) // its own flags
	case "version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "blobcache version: takes no arguments\n\n%s", usage)
			return exitError(2)
		}
		fmt.Fprintln(stdout, versionLine())
		return nil
	}
	if _, ok := commandArgs[cmd]; !ok {
		fmt.Fprintf(stderr, "blobcache: unknown command %q\n\n%s", cmd, usage)
		return exitError(2)
	}
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", defaultDir(), "cache directory")
	var ttl time.Duration
	var segSize sizeFlag
	if cmd == "put" {
		fl.DurationVar(&ttl, "ttl", 0, "expire the blob after this long (for example 90s, 2h); 0: never")
		fl.Var(&segSize, "segment-size", "size of the segments this put creates, which bounds the value (default 256M; K, M, G suffixes)")
	}
	fl.Usage = func() {
		flags := "[--dir D]"
		if cmd == "put" {
			flags = "[--dir D] [--ttl DURATION] [--segment-size SIZE]"
		}
		fmt.Fprintf(fl.Output(), "usage: blobcache %s %s %s\n\n%s\nflags:\n", cmd, flags, commandArgs[cmd], commandHelp[cmd])
		fl.PrintDefaults()
	}
	for _, a := range args[1:] {
		if a == "-h" || a == "-help" || a == "--help" {
			fl.SetOutput(stdout) // asked for: the answer, on standard output
			fl.Usage()
			return nil
		}
	}
	if err := fl.Parse(args[1:]); err != nil {
		return exitError(2)
	}
	rest := fl.Args()
	need := func(n int, what string) error {
		if len(rest) < n || len(rest) > n+boolInt(cmd == "put") {
			fmt.Fprintf(stderr, "blobcache %s: want %s\n\n%s", cmd, what, usage)
			return exitError(2)
		}
		return nil
	}
	switch cmd {
	case "put":
		if err := need(1, "KEY [FILE]"); err != nil {
			return err
		}
		if ttl < 0 {
			fmt.Fprintf(stderr, "blobcache put: --ttl %v is negative\n", ttl)
			return exitError(2)
		}
		var opts []blobcache.Option
		if segSize > 0 {
			opts = append(opts, blobcache.WithSegmentSize(int64(segSize)))
		}
		return put(*dir, rest, ttl, opts, stdin, stdout, stderr)
	case "get":
		if err := need(1, "KEY"); err != nil {
			return err
		}
		return get(*dir, rest[0], stdout)
	case "del":
		if err := need(1, "KEY"); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(*dir, "BLOBCACHE")); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w at %s", blobcache.ErrNoCache, *dir) // nothing to delete: create nothing
		}
		return withCache(*dir, nil, stderr, func(c *blobcache.Cache) error { return c.Delete([]byte(rest[0])) })
	case "stat":
		if err := need(0, "no arguments"); err != nil {
			return err
		}
		return readCache(*dir, func(c *blobcache.Cache) error { return stat(c, stdout) })
	default: // verify
		if err := need(0, "no arguments"); err != nil {
			return err
		}
		return verify(*dir, stdout, stderr)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withCache opens the cache for writing (creating it if the directory holds none, which it says
// on stderr), runs fn and closes it, reporting the first error. Writes are synced before the
// command returns.
func withCache(dir string, opts []blobcache.Option, stderr io.Writer, fn func(*blobcache.Cache) error) error {
	_, err := os.Stat(filepath.Join(dir, "BLOBCACHE")) // the identity file (identity.go)
	created := errors.Is(err, os.ErrNotExist)
	c, err := blobcache.New(dir, append([]blobcache.Option{blobcache.WithFsync(true), blobcache.WithVerifyOnRead(true), blobcache.WithMaxSize(blobcache.MaxSizeAuto)}, opts...)...)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stderr, "blobcache: created a new cache at %s\n", dir)
	}
	err = fn(c)
	return errors.Join(err, c.Close())
}

// readCache opens the cache read-only (it creates nothing and changes nothing; a missing or
// empty directory is "no cache at D"), runs fn and closes it. Reads are verified: a damaged blob
// makes get fail instead of printing wrong bytes.
func readCache(dir string, fn func(*blobcache.Cache) error) error {
	c, err := blobcache.New(dir, blobcache.WithReadOnly(true), blobcache.WithVerifyOnRead(true), blobcache.WithMaxSize(blobcache.MaxSizeAuto))
	if err != nil {
		return err
	}
	err = fn(c)
	return errors.Join(err, c.Close())
}

func put(dir string, args []string, ttl time.Duration, opts []blobcache.Option, stdin io.Reader, stdout, stderr io.Writer) error {
	key := []byte(args[0])
	var po blobcache.PutOptions
	store := func(c *blobcache.Cache, r io.Reader, size int64) error {
		if ttl > 0 {
			po.Expires = c.Now().Add(ttl)
		}
		if limit := c.MaxValueSize(len(key)); size > limit {
			return fmt.Errorf("%w: %s is %d bytes, over the %d bytes a value can have with this cache's segment size; --segment-size raises it",
				blobcache.ErrValueTooLarge, args[0], size, limit)
		}
		if _, err := c.PutFromWith(key, r, size, po); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stored %q: %d bytes\n", args[0], size)
		return nil
	}
	if len(args) == 2 && args[1] != "-" {
		// A file of known size streams into the cache (PutFrom), never whole in memory.
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return withCache(dir, opts, stderr, func(c *blobcache.Cache) error { return store(c, f, fi.Size()) })
	}
	v, err := io.ReadAll(stdin) // standard input: its length is known only at its end
	if err != nil {
		return err
	}
	return withCache(dir, opts, stderr, func(c *blobcache.Cache) error { return store(c, strings.NewReader(string(v)), int64(len(v))) })
}

func get(dir, key string, stdout io.Writer) error {
	return readCache(dir, func(c *blobcache.Cache) error {
		r, ok := c.Get([]byte(key))
		if !ok {
			return fmt.Errorf("%q: %w", key, blobcache.ErrNotFound)
		}
		defer r.Close()
		_, err := io.Copy(stdout, r)
		return err
	})
}

func stat(c *blobcache.Cache, w io.Writer) error {
	s := c.Stats()
	fmt.Fprintf(w, "segments          %d\n", s.Segments)
	fmt.Fprintf(w, "blobs             %d\n", s.Blobs)
	fmt.Fprintf(w, "disk bytes        %d (%s)\n", s.DiskBytes, human(s.DiskBytes))
	fmt.Fprintf(w, "data bytes        %d (%s)\n", s.DataBytes, human(s.DataBytes))
	if s.MaxSize > 0 {
		fmt.Fprintf(w, "disk bound        %d (%s), recorded when the cache was made (serve --max-size overrides it)\n", s.MaxSize, human(s.MaxSize))
	} else {
		fmt.Fprintf(w, "disk bound        none recorded (serve bounds it with --max-size)\n")
	}
	fmt.Fprintf(w, "index memory      %d bytes\n", s.IndexBytes)
	fmt.Fprintf(w, "bloom memory      %d bytes\n", s.BloomBytes)
	fmt.Fprintf(w, "bloom fill        %.4f\n", s.BloomFill)
	fmt.Fprintf(w, "bloom est. FPR    %.6f\n", s.BloomFPR)
	fmt.Fprintf(w, "torn tails        %d\n", s.TornTails)
	fmt.Fprintf(w, "corrupt records   %d\n", s.CorruptRecord)
	if s.StrayFiles > 0 {
		fmt.Fprintf(w, "stray files       %d (files the cache did not write, left alone)\n", s.StrayFiles)
	}
	if s.DirectIOOff != "" {
		fmt.Fprintf(w, "direct I/O off    %s\n", s.DirectIOOff)
	}
	if s.LastCorruption != "" {
		fmt.Fprintf(w, "last corruption   %s\n", s.LastCorruption)
	}
	return nil
}

// versionLine says which build this is: the module version ("(devel)" when built from a
// checkout), the commit and its time when the build recorded them, and the Go release.
func versionLine() string {
	v := "(devel)"
	var rev, at string
	modified := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := "blobcache " + v
	if rev != "" {
		line += " " + rev[:min(12, len(rev))]
		if modified {
			line += "+modified"
		}
		if at != "" {
			line += " " + at
		}
	}
	return line + " " + runtime.Version()
}

// verify checks every record of the cache in dir. A progress bar is drawn on stderr when it is a
// terminal, and only then: a log or a pipe gets the result alone.
func verify(dir string, stdout, stderr io.Writer) error {
	var bar func(done, total int64)
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		bar = progressBar(stderr)
	}
	res, err := blobcache.Verify(dir, bar)
	if bar != nil {
		fmt.Fprintln(stderr)
	}
	if err != nil {
		return err
	}
	for _, c := range res.Corrupt {
		fmt.Fprintf(stdout, "CORRUPT %s offset %d: %v\n", filepath.Base(c.File), c.Offset, c.Err)
	}
	fmt.Fprintf(stdout, "verified %d segments, %d records (%d freed records skipped), %s; %d corrupt\n",
		res.Segments, res.Records, res.Freed, human(res.Bytes), len(res.Corrupt))
	if len(res.Corrupt) > 0 {
		return exitError(1)
	}
	return nil
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar returns a Verify progress function that redraws a bar on w.
func progressBar(w io.Writer) func(done, total int64) {
	return func(done, total int64) {
		const width = 40
		frac := 1.0
		if total > 0 {
			frac = float64(done) / float64(total)
		}
		n := int(frac * width)
		fmt.Fprintf(w, "\r[%s%s] %5.1f%% %s/%s", strings.Repeat("#", n), strings.Repeat(" ", width-n), 100*frac, human(done), human(total))
	}
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
