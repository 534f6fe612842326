package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// nullServer is the ceiling of a memcached-protocol benchmark on its machine: a server that
// stores nothing and answers every get with one fixed value held in memory, so that a load
// generator measured against it shows what the loopback and the load generator itself allow,
// with the least a server in Go can do per request (one read of the request, one write of the
// reply). A server that stores values cannot exceed it with the same load generator.
//
// It speaks just enough of the text protocol for memaslap and mcbench load: get and gets (every
// key answered with the value, flags 0, cas 1), set, add, replace, append, prepend and cas (the
// data block read and dropped, STORED), delete (DELETED), version and quit; anything else gets
// ERROR.
type nullServer struct {
	value []byte
	// header follows the key on a VALUE line: flags, length and, for gets, the cas.
	header, casHeader []byte
}

// null runs a nullServer until SIGTERM or SIGINT.
func null(args []string) error {
	fl := flag.NewFlagSet("null", flag.ExitOnError)
	addr := fl.String("addr", "127.0.0.1:11211", "memcached-protocol address")
	valueSize := fl.Int("value-size", 4096, "bytes of the value every get answers")
	fl.Parse(args)
	s := newNullServer(*valueSize)
	return untilSignal(*addr, s.serve, func(ln net.Listener) { ln.Close() })
}

// untilSignal listens on addr and runs serve on the listener until SIGTERM or SIGINT, which
// calls stop to make serve return; what serve returns then is not an error.
func untilSignal(addr string, serve func(net.Listener) error, stop func(net.Listener)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	go func() {
		<-ctx.Done()
		stop(ln)
	}()
	err = serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// nullValue is the value the null servers answer with: n bytes of the alphabet, over and over.
func nullValue(n int) []byte {
	v := make([]byte, n)
	for i := range v {
		v[i] = 'a' + byte(i%26)
	}
	return v
}

func newNullServer(valueSize int) *nullServer {
	s := &nullServer{value: nullValue(valueSize)}
	s.header = fmt.Appendf(nil, " 0 %d\r\n", valueSize)
	s.casHeader = fmt.Appendf(nil, " 0 %d 1\r\n", valueSize)
	return s
}

// serve accepts connections on ln until it is closed.
func (s *nullServer) serve(ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			s.conn(c)
		}()
	}
}

// conn serves one connection until it ends or sends what the server cannot parse. Replies are
// flushed when no further request is buffered, as memcached answers a pipeline.
func (s *nullServer) conn(c net.Conn) error {
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriterSize(c, 64<<10)
	for {
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			w.WriteString("ERROR\r\n")
			continue
		}
		switch string(f[0]) {
		case "get", "gets":
			h := s.header
			if len(f[0]) == 4 {
				h = s.casHeader
			}
			for _, k := range f[1:] {
				w.WriteString("VALUE ")
				w.Write(k)
				w.Write(h)
				w.Write(s.value)
				w.WriteString("\r\n")
			}
			w.WriteString("END\r\n")
		case "set", "add", "replace", "append", "prepend", "cas":
			if len(f) < 5 {
				w.WriteString("CLIENT_ERROR bad command line format\r\n")
				continue
			}
			n, err := strconv.Atoi(string(f[4]))
			if err != nil || n < 0 {
				return errors.New("null: bad data length")
			}
			if _, err := r.Discard(n + 2); err != nil {
				return err
			}
			if last := f[len(f)-1]; string(last) != "noreply" {
				w.WriteString("STORED\r\n")
			}
		case "delete":
			w.WriteString("DELETED\r\n")
		case "version":
			w.WriteString("VERSION null\r\n")
		case "quit":
			return w.Flush()
		default:
			w.WriteString("ERROR\r\n")
		}
		if w.Buffered() > 1<<20 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}
