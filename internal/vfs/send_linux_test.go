package vfs

import (
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSendValue is what a hit from a segment costs the server to put on a socket, by the
// three ways a checked value could go, for values the page cache holds:
//
//   - copy: pread into a buffer, CRC-32C of the buffer, write to the socket (the server's
//     checked path);
//   - sendfile: sendfile(2) from the file, no check (the path Open takes without VerifyOnRead,
//     and nginx's);
//   - pinned: the file mapped, the value's pages vmspliced into a pipe (the pipe's references
//     keep the page cache from dropping them, so the pages checked are the pages sent), CRC-32C
//     of the mapping, then spliced from the pipe to the socket: a checked send without a copy
//     in user space.
//
// A client goroutine reads and discards what is sent, over loopback. server-ns/op is the CPU
// time of the sending thread alone (RUSAGE_THREAD), so the client's receive copy is left out;
// MB/s is the pair's, on the machine's CPUs together.
func BenchmarkSendValue(b *testing.B) {
	for _, size := range []int{4 << 10, 100 << 10, 1 << 20} {
		data := sendBenchFile(b, size)
		for _, mode := range []string{"copy", "sendfile", "pinned"} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode, size>>10), func(b *testing.B) { sendBench(b, data, mode) })
		}
	}
}

// sendBenchData is a file of random values of one size, in the page cache, and their checksums.
type sendBenchData struct {
	f    *os.File
	size int
	sums []uint32
}

const sendBenchFileBytes = 256 << 20

func sendBenchFile(b *testing.B, size int) *sendBenchData {
	f, err := os.Create(filepath.Join(b.TempDir(), "values"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	d := &sendBenchData{f: f, size: size, sums: make([]uint32, sendBenchFileBytes/size)}
	r := rand.New(rand.NewPCG(1, 2))
	v := make([]byte, size)
	for i := range d.sums {
		for j := 0; j < size; j += 8 {
			x := r.Uint64()
			for k := 0; k < 8 && j+k < size; k++ {
				v[j+k] = byte(x >> (8 * k))
			}
		}
		d.sums[i] = crc32.Checksum(v, castagnoliTable)
		if _, err := f.WriteAt(v, int64(i)*int64(size)); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

func sendBench(b *testing.B, d *sendBenchData, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			_, err = io.Copy(io.Discard, c)
			c.Close()
		}
		done <- err
	}()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	// The sender writes to a blocking descriptor of its own, on a thread of its own, so that its
	// CPU time is the thread's.
	sf, err := conn.(*net.TCPConn).File()
	conn.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sf.Close()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	sock := int(sf.Fd())
	if err := unix.SetNonblock(sock, false); err != nil {
		b.Fatal(err)
	}
	in := int(d.f.Fd())
	var mapped []byte
	var pipe [2]int
	if mode == "pinned" {
		if mapped, err = unix.Mmap(in, 0, sendBenchFileBytes, unix.PROT_READ, unix.MAP_SHARED); err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(mapped)
		if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
			b.Fatal(err)
		}
		defer unix.Close(pipe[0])
		defer unix.Close(pipe[1])
		if _, err := unix.FcntlInt(uintptr(pipe[1]), unix.F_SETPIPE_SZ, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, d.size)
	order := rand.New(rand.NewPCG(3, 4))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(d.size))
	cpu0 := threadCPU()
	for b.Loop() {
		i := order.IntN(len(d.sums))
		off := int64(i) * int64(d.size)
		var err error
		switch mode {
		case "copy":
			if _, err = d.f.ReadAt(buf, off); err == nil {
				if crc32.Checksum(buf, castagnoliTable) != d.sums[i] {
					b.Fatal("checksum mismatch")
				}
				err = sendBenchWrite(sock, buf)
			}
		case "sendfile":
			err = sendBenchSendfile(sock, in, off, d.size)
		case "pinned":
			err = sendBenchPinned(sock, pipe, mapped[off:off+int64(d.size)], d.sums[i])
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "server-ns/op")
}

func threadCPU() time.Duration {
	var r unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &r); err != nil {
		panic(err)
	}
	return time.Duration(syscall.TimevalToNsec(syscall.Timeval(r.Utime)) + syscall.TimevalToNsec(syscall.Timeval(r.Stime)))
}

func sendBenchWrite(fd int, p []byte) error {
	for len(p) > 0 {
		k, err := unix.Write(fd, p)
		if err != nil && err != unix.EINTR {
			return err
		}
		p = p[max(k, 0):]
	}
	return nil
}

func sendBenchSendfile(out, in int, off int64, n int) error {
	for n > 0 {
		k, err := unix.Sendfile(out, in, &off, n)
		if err != nil && err != unix.EINTR {
			return err
		}
		n -= max(k, 0)
	}
	return nil
}

// sendBenchPinned vmsplices v (mapped file pages) into the pipe, checks v against sum while the
// pipe pins its pages, and splices the pipe to the socket.
func sendBenchPinned(sock int, pipe [2]int, v []byte, sum uint32) error {
	for rest := v; len(rest) > 0; {
		k, err := unix.Vmsplice(pipe[1], []unix.Iovec{{Base: &rest[0], Len: uint64(len(rest))}}, 0)
		if err != nil && err != unix.EINTR {
			return err
		}
		rest = rest[max(k, 0):]
	}
	if crc32.Checksum(v, castagnoliTable) != sum {
		return fmt.Errorf("checksum mismatch")
	}
	for left := len(v); left > 0; {
		k, err := unix.Splice(pipe[0], nil, sock, nil, left, unix.SPLICE_F_MOVE)
		if err != nil && err != unix.EINTR {
			return err
		}
		left -= int(max(k, 0))
	}
	return nil
}
