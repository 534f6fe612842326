package memcached

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// MaxValueSize is the longest value Get takes from a server; a longer VALUE line is an error,
// not an allocation of whatever size it names.
const MaxValueSize = 1 << 30

// Conn is a minimal memcached text-protocol client over one connection.
type Conn struct {
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
}

// Dial connects to a memcached-protocol server.
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &Conn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10), timeout: timeout}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Set stores value under key.
func (c *Conn) Set(key string, value []byte) error {
	c.nc.SetDeadline(time.Now().Add(c.timeout))
	c.w.WriteString("set ")
	c.w.WriteString(key)
	c.w.WriteString(" 0 0 ")
	c.w.WriteString(strconv.Itoa(len(value)))
	c.w.WriteString("\r\n")
	c.w.Write(value)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if string(line) != "STORED\r\n" {
		return fmt.Errorf("set %s: %q", key, bytes.TrimSpace(line))
	}
	return nil
}

// Get reads key's value into buf (grown as needed) and returns it, or hit false on a miss.
func (c *Conn) Get(key string, buf []byte) (value []byte, hit bool, err error) {
	c.nc.SetDeadline(time.Now().Add(c.timeout))
	c.w.WriteString("get ")
	c.w.WriteString(key)
	c.w.WriteString("\r\n")
	if err := c.w.Flush(); err != nil {
		return nil, false, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, false, err
	}
	if string(line) == "END\r\n" {
		return buf[:0], false, nil
	}
	// VALUE <key> <flags> <bytes>\r\n
	f := bytes.Fields(line)
	if len(f) < 4 || string(f[0]) != "VALUE" || string(f[1]) != key {
		return nil, false, fmt.Errorf("get %s: %q", key, bytes.TrimSpace(line))
	}
	n, err := strconv.Atoi(string(f[3]))
	if err != nil || n < 0 || n > MaxValueSize {
		return nil, false, fmt.Errorf("get %s: bad length in %q", key, bytes.TrimSpace(line))
	}
	if cap(buf) < n+2 {
		buf = make([]byte, n+2)
	}
	buf = buf[:n+2]
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return nil, false, err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return nil, false, errors.New("get: value not followed by \\r\\n")
	}
	end, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, false, err
	}
	if string(end) != "END\r\n" {
		return nil, false, fmt.Errorf("get %s: %q after the value", key, bytes.TrimSpace(end))
	}
	return buf[:n], true, nil
}
