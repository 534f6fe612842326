package testproc

import (
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a program that cannot
// listen on port 0 and report the port it got.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// attempts is how many ports Start tries.
const attempts = 4

// Start starts the process command makes for a free port, and returns the port's address once
// it accepts a connection. The process is killed, and waited for, when the test ends. A process
// that exits before it accepts (another one took the port meanwhile) is started again on another
// port, a few times; then, or when it never accepts, the test fails. why, if not nil, says what
// the process printed, for the failure.
func Start(t testing.TB, name string, command func(port int) *exec.Cmd, why func() string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := command(port)
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// exited is closed once the process is gone (waitErr set): closed, not sent on, since
		// both the wait below and the cleanup receive from it.
		exited := make(chan struct{})
		var waitErr error
		go func() { waitErr = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		if accepted(addr, exited) {
			return addr
		}
		select {
		case <-exited:
		default:
			t.Fatalf("%s never accepted connections on %s", name, addr)
		}
		said := ""
		if why != nil {
			said = why()
		}
		if attempt == attempts {
			t.Fatalf("%s exited: %v\n%s", name, waitErr, said)
		}
		t.Logf("%s exited (%v: %s); trying another port", name, waitErr, said)
	}
}

// accepted waits up to 5 s for addr to accept a connection; false if it does not, or once
// exited is closed.
func accepted(addr string, exited <-chan struct{}) bool {
	for range 500 {
		select {
		case <-exited:
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}
