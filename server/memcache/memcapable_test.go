package memcache

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// memcapableFailing lists the tests of libmemcached's memcapable (ASCII protocol) that blobcache
// fails today, each with its reason. TestMemcapable fails when any other test fails, and when a
// listed one passes: the list can only shrink.
//
// "ascii add noreply", "ascii replace noreply" and "ascii cas noreply" pass although those
// commands are not supported: with noreply nothing is answered, and memcapable checks no more
// than that the connection stays in step.
var memcapableFailing = map[string]string{}

// TestMemcapable runs memcapable -a (Debian package libmemcached-tools, where the binary is
// memccapable) against the server and checks its verdicts against memcapableFailing.
func TestMemcapable(t *testing.T) {
	bin, err := exec.LookPath("memcapable")
	if err != nil {
		bin, err = exec.LookPath("memccapable")
	}
	if err != nil {
		msg := "memcapable is not installed (Debian: apt-get install -y libmemcached-tools; .ci/run installs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	e := newEnv(t, Config{})
	host, port, _ := net.SplitHostPort(e.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// memcapable exits non-zero when a test fails; its verdicts are what counts.
	cmd := exec.CommandContext(ctx, bin, "-a", "-h", host, "-p", port, "-t", "5")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("memcapable did not finish: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	verdicts := parseMemcapable(stdout.String())
	if len(verdicts) != 27 {
		t.Fatalf("memcapable ran %d tests, want 27 (%v)\n%s%s", len(verdicts), err, stdout.String(), stderr.String())
	}
	failed := 0
	for _, pass := range verdicts {
		if !pass {
			failed++
		}
	}
	// Its summary (on standard error when tests fail) must agree with the verdicts read.
	summary := fmt.Sprintf("%d of %d tests failed", failed, len(verdicts))
	if failed == 0 {
		summary = "All tests passed"
	}
	if !strings.Contains(stdout.String()+stderr.String(), summary) {
		t.Fatalf("memcapable's summary is not %q:\n%s%s", summary, stdout.String(), stderr.String())
	}
	var passed []string
	for name, pass := range verdicts {
		reason, listed := memcapableFailing[name]
		switch {
		case pass && listed:
			t.Errorf("%q passes now: remove it from memcapableFailing (it was listed as: %s)", name, reason)
		case !pass && !listed:
			t.Errorf("%q fails", name)
		case pass:
			passed = append(passed, name)
		}
	}
	for name := range memcapableFailing {
		if _, ran := verdicts[name]; !ran {
			t.Errorf("memcapableFailing lists %q, which memcapable did not run", name)
		}
	}
	sort.Strings(passed)
	t.Logf("memcapable: %d of %d tests pass: %s", len(passed), len(verdicts), strings.Join(passed, ", "))
	if t.Failed() {
		t.Logf("memcapable output:\n%s\n%s", stdout.String(), stderr.String())
	}
}

// memcapableTest matches one test in memcapable's standard output: its name, padded with
// spaces, then "[pass]" if it passed. The "[FAIL]" verdicts go to standard error, which is not
// in step with standard output, so a name without "[pass]" is a failure.
var memcapableTest = regexp.MustCompile(`(ascii(?: [a-z]+)+) {2,}(\[pass\])?`)

// parseMemcapable returns each test's verdict from memcapable's standard output.
func parseMemcapable(stdout string) map[string]bool {
	verdicts := map[string]bool{}
	for _, m := range memcapableTest.FindAllStringSubmatch(stdout, -1) {
		verdicts[m[1]] = m[2] != ""
	}
	return verdicts
}
