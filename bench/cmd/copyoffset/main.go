//go:build linux

// Command copyoffset measures how fast the kernel copies a value from user memory into a pipe,
// by where the value starts in its page relative to where its copy lands. The pipe is empty
// before each write, so the copy lands at the header's length into a fresh page; the value is
// written behind a header as a server's reply is. Each cell is the fastest of its rounds, the
// rounds alternated over the cells.
//
//	copyoffset [-size 1000000] [-header 82] [-rounds 30]
//
// It prints one line per source offset: the offset, the destination's distance from the source
// modulo the page size, and GB/s.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	size := flag.Int("size", 1000000, "value bytes")
	header := flag.Int("header", 82, "header bytes written before the value, in the same writev")
	rounds := flag.Int("rounds", 30, "writes per cell (the fastest is reported)")
	flag.Parse()

	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		log.Fatal(err)
	}
	need := *size + *header
	if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, need+(1<<20)); err != nil {
		log.Fatalf("F_SETPIPE_SZ: %v (raise /proc/sys/fs/pipe-max-size)", err)
	}
	page := os.Getpagesize()
	const span = 64 << 20
	mem, err := unix.Mmap(-1, 0, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		log.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i)
	}
	hdr := make([]byte, *header)
	sink := make([]byte, need)
	offsets := []int{0, 20, 64, *header - 20, *header - 2, *header, *header + 2, *header + 64, 2000}
	best := make([]time.Duration, len(offsets))
	stride := (*size + 2*page) / page * page
	for r := 0; r < *rounds; r++ {
		for i, off := range offsets {
			base := (r * stride) % (span - stride)
			iov := [][]byte{hdr, mem[base+off : base+off+*size]}
			t := time.Now()
			if _, err := unix.Writev(p[1], iov); err != nil {
				log.Fatal(err)
			}
			el := time.Since(t)
			for got := 0; got < need; {
				n, err := unix.Read(p[0], sink)
				if err != nil {
					log.Fatal(err)
				}
				got += n
			}
			if best[i] == 0 || el < best[i] {
				best[i] = el
			}
		}
	}
	for i, off := range offsets {
		dist := ((*header-off)%page + page) % page
		fmt.Printf("source offset %4d  destination - source %4d (mod %d)  %.2f GB/s\n",
			off, dist, page, float64(*size)/best[i].Seconds()/1e9)
	}
}
