package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

// buildBinary builds this command into a temporary directory and returns its path; it skips
// under -short or without a go command.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	exe := filepath.Join(t.TempDir(), "blobcache")
	if out, err := exec.Command(goTool, "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// notifySocket is a stand-in for systemd's notify socket: a unixgram socket in a directory of
// its own (short, since a socket path has at most 107 bytes).
type notifySocket struct {
	conn *net.UnixConn
	path string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "blobcache-notify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{conn: conn, path: path}
}

// waitFor reads datagrams until one holds the assignment want (a line such as "READY=1") and
// returns it with the datagrams read before it; it fails the test after within.
func (n *notifySocket) waitFor(t *testing.T, want string, within time.Duration) (got string, before []string) {
	t.Helper()
	n.conn.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			t.Fatalf("no %s within %v (got %q): %v", want, within, before, err)
		}
		msg := string(buf[:k])
		if slices.Contains(strings.Split(msg, "\n"), want) {
			return msg, before
		}
		before = append(before, msg)
	}
}

// notifyEnv is this process's environment without anything systemd may have given it, plus
// extra.
func notifyEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "BLOBCACHE_DIR", "BLOBCACHE_TOKEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// sigterm stops srv with SIGTERM and returns how it exited, failing the test if it has not
// within.
func sigterm(t *testing.T, srv serveProcess, within time.Duration) *os.ProcessState {
	t.Helper()
	exited := make(chan error, 1)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- srv.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return srv.cmd.ProcessState
	case <-time.After(within):
		srv.cmd.Process.Kill()
		<-exited
		t.Fatalf("serve did not exit within %v of SIGTERM; stderr %q", within, srv.cmd.Stderr)
		return nil
	}
}

// TestServeSystemd runs `blobcache serve` as systemd runs a Type=notify service: with
// NOTIFY_SOCKET (and WATCHDOG_USEC) set, it must say READY=1 only when both listeners answer,
// STOPPING=1 on SIGTERM, exit 0 having drained its write buffer, and ping the watchdog.
func TestServeSystemd(t *testing.T) {
	exe := buildBinary(t)
	const stopWithin = 40 * time.Second // --shutdown-timeout (30s) and the cache's close

	t.Run("ready-stop-restart", func(t *testing.T) {
		sock := listenNotify(t)
		dir := filepath.Join(t.TempDir(), "cache")
		// Nothing reaches a segment before the SIGTERM but by the drain.
		srv := startServeProcess(t, exe, notifyEnv("NOTIFY_SOCKET="+sock.path), dir, "--flush-interval", "1h")
		ready, before := sock.waitFor(t, "READY=1", time.Minute)
		// At this moment both listeners answer.
		c, err := net.DialTimeout("tcp", srv.mc, 5*time.Second)
		if err != nil {
			t.Fatalf("memcached listener once READY=1: %v", err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "version\r\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.HasPrefix(line, "VERSION blobcache-") {
			t.Fatalf("version once READY=1: %q, %v", line, err)
		}
		resp, err := http.Get("http://" + srv.http + "/healthz")
		if err != nil {
			t.Fatalf("HTTP listener once READY=1: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz once READY=1: %d", resp.StatusCode)
		}
		want := fmt.Sprintf("STATUS=serving http=%s memcache=%s dir=%s", srv.http, srv.mc, dir)
		if !slices.Contains(strings.Split(ready, "\n"), want) {
			t.Errorf("READY=1 came with %q, want the line %q", ready, want)
		}
		if len(before) == 0 || !strings.HasPrefix(before[0], "STATUS=opening the cache at ") {
			t.Errorf("before READY=1: %q, want a STATUS saying the cache is being opened", before)
		}

		mc := memcache.New(srv.mc)
		for i := range 5 {
			key := fmt.Sprint("key", i)
			if err := mc.Set(&memcache.Item{Key: key, Value: []byte("value of " + key)}); err != nil {
				t.Fatalf("set %s: %v", key, err)
			}
		}
		httpPut(t, srv.http, "put", "by HTTP")

		if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stopping, before := sock.waitFor(t, "STOPPING=1", 10*time.Second)
		for _, msg := range before {
			if strings.Contains(msg, "WATCHDOG=1") {
				t.Errorf("a watchdog ping without WATCHDOG_USEC: %q", msg)
			}
		}
		if !strings.Contains(stopping, "STATUS=draining") {
			t.Errorf("STOPPING=1 came with %q, want a STATUS saying it drains", stopping)
		}
		if st := sigterm(t, srv, stopWithin); st.ExitCode() != 0 {
			t.Fatalf("serve exited with %v after SIGTERM; stderr %q", st, srv.cmd.Stderr)
		}

		// Started again (not under systemd), it has every key.
		srv = startServeProcess(t, exe, notifyEnv(), dir)
		mc = memcache.New(srv.mc)
		for i := range 5 {
			key := fmt.Sprint("key", i)
			it, err := mc.Get(key)
			if err != nil || string(it.Value) != "value of "+key {
				t.Errorf("after the restart, %s: %v", key, err)
			}
		}
		if it, err := mc.Get("put"); err != nil || string(it.Value) != "by HTTP" {
			t.Errorf("after the restart, the HTTP PUT: %v", err)
		}
		if st := sigterm(t, srv, stopWithin); st.ExitCode() != 0 {
			t.Errorf("second serve exited with %v; stderr %q", st, srv.cmd.Stderr)
		}
	})

	t.Run("watchdog", func(t *testing.T) {
		sock := listenNotify(t)
		dir := filepath.Join(t.TempDir(), "cache")
		// WatchdogSec=200ms: a ping every 100 ms.
		srv := startServeProcess(t, exe, notifyEnv("NOTIFY_SOCKET="+sock.path, "WATCHDOG_USEC=200000"), dir)
		sock.waitFor(t, "READY=1", time.Minute)
		start := time.Now()
		for range 3 {
			sock.waitFor(t, "WATCHDOG=1", 5*time.Second)
		}
		t.Logf("3 watchdog pings in %v", time.Since(start))
		if st := sigterm(t, srv, stopWithin); st.ExitCode() != 0 {
			t.Fatalf("serve exited with %v after SIGTERM; stderr %q", st, srv.cmd.Stderr)
		}
	})
}

// TestSystemdNotifier: without NOTIFY_SOCKET serve tells nobody anything; with it, datagrams go
// to the socket, an abstract one ('@') included, and the watchdog interval is half WATCHDOG_USEC.
func TestSystemdNotifier(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	if notify, wd := systemdNotifier(log); notify != nil || wd != 0 {
		t.Errorf("without NOTIFY_SOCKET: a notifier (%v), watchdog %v", notify != nil, wd)
	}

	sock := listenNotify(t)
	t.Setenv("NOTIFY_SOCKET", sock.path)
	notify, wd := systemdNotifier(log)
	if notify == nil || wd != 100*time.Millisecond {
		t.Fatalf("with NOTIFY_SOCKET and WATCHDOG_USEC=200000: notifier %v, watchdog %v; want one, 100ms", notify != nil, wd)
	}
	notify("READY=1\nSTATUS=x")
	if got, _ := sock.waitFor(t, "READY=1", 5*time.Second); got != "READY=1\nSTATUS=x" {
		t.Errorf("datagram %q", got)
	}
	// The watchdog is another process's.
	t.Setenv("WATCHDOG_PID", "1")
	if _, wd := systemdNotifier(log); wd != 0 {
		t.Errorf("WATCHDOG_PID of another process: watchdog %v", wd)
	}
	t.Setenv("WATCHDOG_PID", "")

	name := fmt.Sprintf("@blobcache-notify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatalf("abstract socket: %v", err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", name)
	notify, _ = systemdNotifier(log)
	notify("STOPPING=1")
	abstract := &notifySocket{conn: conn, path: name}
	abstract.waitFor(t, "STOPPING=1", 5*time.Second)
}
