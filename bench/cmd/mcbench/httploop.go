//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// httpLoop is httpnull served by event loops of its own instead of a goroutine per connection:
// one loop per P, each locked to its thread, blocking in epoll_wait on its own listening socket
// (SO_REUSEPORT spreads the connections). It answers every request with one fixed body, like
// httpnull, and exists to measure what such a network layer costs per request on the machine
// (system calls, context switches, tail latency) beside the runtime's poller and nginx's loop:
// the choice issue 29 asks to make by measurement. It reads no header: a request is whatever ends
// with an empty line (requestEnd).
func httpLoop(args []string) error {
	fl := flag.NewFlagSet("httploop", flag.ExitOnError)
	addr := fl.String("addr", "127.0.0.1:8080", "HTTP address")
	size := fl.Int("value-size", 4096, "bytes of the body every request answers")
	fl.Parse(args)
	sa, err := sockaddr(*addr)
	if err != nil {
		return err
	}
	body := nullValue(*size)
	head := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
		strconv.Itoa(*size) + "\r\n\r\n")
	errc := make(chan error, 1)
	for range runtime.GOMAXPROCS(0) {
		ln, err := listenReusePort(sa)
		if err != nil {
			return err
		}
		go func() { errc <- serveLoop(ln, head, body) }()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case <-sig:
		return nil
	case err := <-errc:
		return err
	}
}

// sockaddr parses an IPv4 host:port.
func sockaddr(addr string) (*unix.SockaddrInet4, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	return sa, nil
}

// listenReusePort opens a non-blocking listening socket on sa with SO_REUSEPORT.
func listenReusePort(sa *unix.SockaddrInet4) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, opt := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// loopConn is one connection of a loop: the bytes read and not yet framed, and the answers to
// write (reused from request to request).
type loopConn struct {
	in  []byte
	out [][]byte
}

// serveLoop runs one event loop on listening socket ln until an error.
func serveLoop(ln int, head, body []byte) error {
	runtime.LockOSThread()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ln, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ln)}); err != nil {
		return err
	}
	conns := map[int32]*loopConn{}
	events := make([]unix.EpollEvent, 128)
	buf := make([]byte, 64<<10)
	closeConn := func(fd int32) {
		unix.EpollCtl(ep, unix.EPOLL_CTL_DEL, int(fd), nil)
		unix.Close(int(fd))
		delete(conns, fd)
	}
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == ln {
				for {
					fd, _, err := unix.Accept4(ln, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
					if err != nil {
						break // EAGAIN: none left
					}
					unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
					if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}); err != nil {
						unix.Close(fd)
						continue
					}
					conns[int32(fd)] = &loopConn{}
				}
				continue
			}
			c := conns[ev.Fd]
			if c == nil {
				continue
			}
			if !c.serve(int(ev.Fd), buf, head, body) {
				closeConn(ev.Fd)
			}
		}
	}
}

// serve reads what fd has, answers each whole request in it, and writes the answers; false when
// the connection is done (closed by the client, or an error). A write that would block ends the
// connection: a client that does not read its answers is not this benchmark's.
func (c *loopConn) serve(fd int, buf, head, body []byte) bool {
	m, err := unix.Read(fd, buf)
	if m <= 0 || err != nil {
		return errors.Is(err, unix.EAGAIN)
	}
	data := buf[:m]
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		data = c.in
	}
	for {
		end := requestEnd(data)
		if end < 0 {
			break
		}
		data = data[end:]
		c.out = append(c.out, head, body)
	}
	if len(data) > 64<<10 {
		return false // a request this long is not one this server answers
	}
	c.in = append(c.in[:0], data...)
	iov := c.out
	for len(iov) > 0 {
		w, err := unix.Writev(fd, iov)
		if err != nil {
			return false
		}
		for w > 0 {
			if w >= len(iov[0]) {
				w -= len(iov[0])
				iov = iov[1:]
				continue
			}
			iov[0] = iov[0][w:]
			w = 0
		}
	}
	clear(c.out)
	c.out = c.out[:0]
	return true
}

// requestEnd returns the length of the first request in b (through the empty line that ends its
// header; a request here has no body), or -1 if b holds no whole one yet.
func requestEnd(b []byte) int {
	i := bytes.Index(b, []byte("\r\n\r\n"))
	if i < 0 {
		return -1
	}
	return i + 4
}
