// Command blobcache is the command-line front of the BlobCache library.
//
//	blobcache put    --dir D KEY [FILE]   store FILE (or standard input) under KEY
//	blobcache get    --dir D KEY          write the blob to standard output
//	blobcache del    --dir D KEY          delete KEY
//	blobcache stat   --dir D              segments, blobs, bytes, bloom fill and false-positive rate
//	blobcache verify --dir D              check every record and checksum; exit 1 on corruption
//	blobcache serve  [--dir D] [flags]    HTTP and memcached-protocol server (docs/SERVER.md)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/seed57392e9e/blobcache"
)

const usage = `usage: blobcache <command> [--dir D] [args]

commands:
  put    --dir D KEY [FILE]   store FILE (or standard input) under KEY
  get    --dir D KEY          write the blob stored under KEY to standard output
  del    --dir D KEY          delete KEY
  stat   --dir D              print segments, blobs, bytes, bloom fill and estimated FPR
  verify --dir D              read every record and checksum; exit 1 on corruption
  serve  [--dir D] [flags]    serve HTTP and the memcached protocol on 127.0.0.1 (serve -h)

The default directory is $BLOBCACHE_DIR, or ./blobcache-data.
`

// commandArgs are the arguments of each command after its flags, for its usage line.
var commandArgs = map[string]string{
	"put": "KEY [FILE]", "get": "KEY", "del": "KEY", "stat": "", "verify": "",
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
	if cmd == "serve" {
		return serveCommand(args[1:], stdout, stderr) // its own flags
	}
	fl := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", defaultDir(), "cache directory")
	fl.Usage = func() {
		fmt.Fprintf(fl.Output(), "usage: blobcache %s [--dir D] %s\n\nflags:\n", cmd, commandArgs[cmd])
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
		return put(*dir, rest, stdin, stdout)
	case "get":
		if err := need(1, "KEY"); err != nil {
			return err
		}
		return get(*dir, rest[0], stdout)
	case "del":
		if err := need(1, "KEY"); err != nil {
			return err
		}
		return withCache(*dir, func(c *blobcache.Cache) error { return c.Delete([]byte(rest[0])) })
	case "stat":
		if err := need(0, "no arguments"); err != nil {
			return err
		}
		return withCache(*dir, func(c *blobcache.Cache) error { return stat(c, stdout) })
	case "verify":
		if err := need(0, "no arguments"); err != nil {
			return err
		}
		return verify(*dir, stdout, stderr)
	}
	fmt.Fprintf(stderr, "blobcache: unknown command %q\n\n%s", cmd, usage)
	return exitError(2)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// withCache opens the cache, runs fn and closes it, reporting the first error. Reads are
// verified: a damaged blob makes get fail instead of printing wrong bytes.
func withCache(dir string, fn func(*blobcache.Cache) error) error {
	c, err := blobcache.New(dir, blobcache.WithFsync(true), blobcache.WithVerifyOnRead(true))
	if err != nil {
		return err
	}
	err = fn(c)
	return errors.Join(err, c.Close())
}

func put(dir string, args []string, stdin io.Reader, stdout io.Writer) error {
	key := []byte(args[0])
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
		return withCache(dir, func(c *blobcache.Cache) error {
			if err := c.PutFrom(key, f, fi.Size()); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "stored %q: %d bytes\n", args[0], fi.Size())
			return nil
		})
	}
	v, err := io.ReadAll(stdin) // standard input: its length is known only at its end
	if err != nil {
		return err
	}
	return withCache(dir, func(c *blobcache.Cache) error {
		if err := c.Put(key, v); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stored %q: %d bytes\n", args[0], len(v))
		return nil
	})
}

func get(dir, key string, stdout io.Writer) error {
	return withCache(dir, func(c *blobcache.Cache) error {
		r, ok := c.Get([]byte(key))
		if !ok {
			return fmt.Errorf("%q: %w", key, blobcache.ErrNotFound)
		}
		_, err := io.Copy(stdout, r)
		return err
	})
}

func stat(c *blobcache.Cache, w io.Writer) error {
	s := c.Stats()
	fmt.Fprintf(w, "segments          %d\n", s.Segments)
	fmt.Fprintf(w, "blobs             %d\n", s.Blobs)
	fmt.Fprintf(w, "disk bytes        %d (%s)\n", s.DiskBytes, human(s.DiskBytes))
	fmt.Fprintf(w, "index memory      %d bytes\n", s.IndexBytes)
	fmt.Fprintf(w, "bloom memory      %d bytes\n", s.BloomBytes)
	fmt.Fprintf(w, "bloom fill        %.4f\n", s.BloomFill)
	fmt.Fprintf(w, "bloom est. FPR    %.6f\n", s.BloomFPR)
	fmt.Fprintf(w, "torn tails cut    %d\n", s.TornTails)
	fmt.Fprintf(w, "corrupt records   %d\n", s.CorruptRecord)
	if s.LastCorruption != "" {
		fmt.Fprintf(w, "last corruption   %s\n", s.LastCorruption)
	}
	return nil
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
