package memcache

import (
	"bufio"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/server/store"
)

// TestScripts runs the protocol conversations in testdata/scripts. Each file is one
// conversation with a fresh server:
//
//	# comment
//	! token T          (first lines only) the server requires token T
//	! max-value N      (first lines only) the server takes values of at most N bytes
//	> text             send text and "\r\n" (Go string escapes: \x00, \r, \n, \t, \\, \")
//	>| text            send text without a line ending
//	< text             expect text and "\r\n"; a "*" in text matches anything up to the line end
//	! closed           expect the server to have closed the connection
//	! reconnect        open a new connection
//
// At every "< " the runner reads exactly what is expected; at the end it checks that nothing
// more was sent.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/scripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScript(t, file)
		})
	}
}

func unquote(t *testing.T, lineNo int, s string) string {
	u, err := strconv.Unquote(`"` + s + `"`)
	if err != nil {
		t.Fatalf("line %d: bad escape in %q: %v", lineNo, s, err)
	}
	return u
}

func runScript(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var cfg Config
	var scfg store.Config
	for _, l := range lines {
		if tok, ok := strings.CutPrefix(l, "! token "); ok {
			cfg.Token = tok
		}
		if n, ok := strings.CutPrefix(l, "! max-value "); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, l, err)
			}
			scfg.MaxValueSize = v
		}
	}
	env := newEnvStore(t, cfg, scfg)
	var c net.Conn
	var br *bufio.Reader
	connect := func() {
		if c != nil {
			c.Close()
		}
		c = env.dial()
		br = bufio.NewReader(c)
	}
	connect()
	defer func() { c.Close() }()
	for i, l := range lines {
		n := i + 1
		l = strings.TrimRight(l, "\r")
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "! token ") || strings.HasPrefix(l, "! max-value "):
		case strings.HasPrefix(l, ">| "):
			send(t, c, unquote(t, n, l[3:]))
		case strings.HasPrefix(l, "> ") || l == ">":
			send(t, c, unquote(t, n, strings.TrimPrefix(l[1:], " "))+"\r\n")
		case strings.HasPrefix(l, "< "):
			want := unquote(t, n, l[2:])
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if i := strings.IndexByte(want, '*'); i >= 0 {
				got, err := br.ReadString('\n')
				got = strings.TrimSuffix(got, "\r\n")
				if err != nil || !strings.HasPrefix(got, want[:i]) || !strings.HasSuffix(got, want[i+1:]) {
					t.Fatalf("%s:%d: got %q (%v), want %q", file, n, got, err, want)
				}
				continue
			}
			want += "\r\n"
			got := make([]byte, len(want))
			if k, err := io.ReadFull(br, got); err != nil {
				t.Fatalf("%s:%d: got %q then %v, want %q", file, n, got[:k], err, want)
			}
			if string(got) != want {
				t.Fatalf("%s:%d: got %q, want %q", file, n, got, want)
			}
		case l == "! closed":
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if extra, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("%s:%d: connection still open (read %q, %v)", file, n, extra, err)
			}
		case l == "! reconnect":
			connect()
		default:
			t.Fatalf("%s:%d: cannot parse %q", file, n, l)
		}
	}
	// Nothing more was sent.
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if extra, err := br.Peek(1); err == nil {
		t.Fatalf("%s: unexpected trailing output %q", file, extra)
	}
}

func send(t *testing.T, c net.Conn, s string) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
}
