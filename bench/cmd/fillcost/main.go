//go:build linux

// Command fillcost measures what it costs the kernel to get freshly written data into the page
// cache, and to copy it out again, the two costs an engine that serves hits from the page cache
// pays for every new version of a blob. It writes -size bytes to a new file in -batch writes, in
// one of three ways, then reads -reads random 1 MiB blocks of it, -passes times, and prints the
// process's system time per MiB for each step (getrusage):
//
//	direct    O_DIRECT writes: nothing lands in the page cache; reads fill it
//	willneed  O_DIRECT writes, each followed by posix_fadvise(WILLNEED) over what it wrote, in
//	          steps of 4 MiB (the kernel caps one call at the device's readahead size)
//	buffered  buffered writes (then fdatasync): the page cache keeps what was written
//
// Writing is repeated -writes times over the same offsets: the first pass writes to fresh pages
// of a new file, the later ones over pages the page cache may already hold.
//
//	fillcost -mode willneed -dir /var/tmp/fill
//
// Linux only. Drop the page cache first (echo 3 > /proc/sys/vm/drop_caches) for a cold start.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	mode := flag.String("mode", "direct", "direct, willneed or buffered")
	dir := flag.String("dir", ".", "directory for the test file (removed at the end)")
	size := flag.Int64("size", 2<<30, "bytes written")
	batch := flag.Int("batch", 16<<20, "bytes per write")
	writes := flag.Int("writes", 1, "passes of writes over the same offsets")
	reads := flag.Int("reads", 2048, "random 1 MiB reads per read pass")
	passes := flag.Int("passes", 3, "read passes")
	flag.Parse()
	if err := run(*mode, *dir, *size, *batch, *writes, *reads, *passes); err != nil {
		fmt.Fprintln(os.Stderr, "fillcost:", err)
		os.Exit(1)
	}
}

func systemTime() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Stime.Nano())
}

func run(mode, dir string, size int64, batch, writes, reads, passes int) error {
	flags := os.O_CREATE | os.O_RDWR | os.O_TRUNC
	switch mode {
	case "direct", "willneed":
		flags |= syscall.O_DIRECT
	case "buffered":
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	name := filepath.Join(dir, "fillcost.data")
	w, err := os.OpenFile(name, flags, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(name)
	defer w.Close()
	r, err := os.Open(name)
	if err != nil {
		return err
	}
	defer r.Close()
	// Anonymous memory is page-aligned, as O_DIRECT wants.
	buf, err := unix.Mmap(-1, 0, batch, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	mib := float64(1 << 20)
	for pass := 1; pass <= writes; pass++ {
		s0, t0 := systemTime(), time.Now()
		for off := int64(0); off < size; off += int64(batch) {
			if _, err := w.WriteAt(buf, off); err != nil {
				return err
			}
			if mode == "willneed" {
				for o := off; o < off+int64(batch); o += 4 << 20 {
					if err := unix.Fadvise(int(r.Fd()), o, min(4<<20, off+int64(batch)-o), unix.FADV_WILLNEED); err != nil {
						return err
					}
				}
			}
		}
		if mode == "buffered" {
			if err := unix.Fdatasync(int(w.Fd())); err != nil {
				return err
			}
		}
		sys, wall := systemTime()-s0, time.Since(t0)
		fmt.Printf("%s write pass %d: %.0f MB/s, system time %v, %.0f µs per MiB\n", mode, pass,
			float64(size)/wall.Seconds()/1e6, sys.Round(time.Millisecond), float64(sys.Microseconds())/(float64(size)/mib))
	}
	time.Sleep(time.Second) // let readahead in flight land
	rb := make([]byte, 1<<20)
	for pass := 1; pass <= passes; pass++ {
		s0, t0 := systemTime(), time.Now()
		for range reads {
			if _, err := r.ReadAt(rb, rand.Int64N(size>>20)<<20); err != nil {
				return err
			}
		}
		sys, wall := systemTime()-s0, time.Since(t0)
		fmt.Printf("%s read pass %d: %.0f MB/s, system time %v, %.0f µs per MiB\n", mode, pass,
			float64(reads)*mib/wall.Seconds()/1e6, sys.Round(time.Millisecond), float64(sys.Microseconds())/float64(reads))
	}
	return nil
}
