package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	unitFile     = "../../deploy/systemd/blobcache.service"
	unitExecPath = "/usr/local/bin/blobcache" // where the unit expects the binary
)

// TestSystemdUnit runs `systemd-analyze verify` on deploy/systemd/blobcache.service, with
// ExecStart pointed at a freshly built binary (verify checks that it is executable): any message
// about the unit fails the test. It also holds the unit to serve's defaults: descriptors for both
// listeners' --max-conns, and a stop timeout longer than --shutdown-timeout.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		const msg = "systemd-analyze is not installed (Debian: apt-get install -y systemd; " +
			"bash scripts/test.sh installs it when it can)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg) // CI installs it: missing there is a failure
		}
		t.Skip(msg)
	}
	unit, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "\nExecStart="+unitExecPath+" serve ") {
		t.Fatalf("%s: no ExecStart=%s serve ...", unitFile, unitExecPath)
	}
	exe := buildBinary(t)
	dir := t.TempDir()
	test := filepath.Join(dir, "blobcache.service")
	rewritten := strings.Replace(string(unit), "\nExecStart="+unitExecPath+" ", "\nExecStart="+exe+" ", 1)
	if err := os.WriteFile(test, []byte(rewritten), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", test).CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(line, "blobcache.service") || strings.Contains(line, dir) {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (not about this unit): %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	// What serve's own flags default to, from its usage.
	usage, _ := exec.Command(exe, "serve", "-h").CombinedOutput()
	flagDefault := func(name string) string {
		m := regexp.MustCompile(`(?m)^  -` + name + ` \w+\n.*\(default ([^)]+)\)`).FindSubmatch(usage)
		if m == nil {
			t.Fatalf("serve -h has no default for --%s:\n%s", name, usage)
		}
		return string(m[1])
	}
	svc := unitService(t, string(unit))
	maxConns, err := strconv.Atoi(flagDefault("max-conns"))
	if err != nil {
		t.Fatal(err)
	}
	if nofile, err := strconv.Atoi(svc["LimitNOFILE"]); err != nil || nofile < 2*maxConns+1024 {
		t.Errorf("LimitNOFILE=%s: want at least 2 listeners x %d connections and room for the cache's files", svc["LimitNOFILE"], maxConns)
	}
	shutdown := flagDefault("shutdown-timeout")
	if m := regexp.MustCompile(`--shutdown-timeout[ =](\S+)`).FindStringSubmatch(svc["ExecStart"]); m != nil {
		shutdown = m[1]
	}
	drain, err := time.ParseDuration(shutdown)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := time.ParseDuration(strings.ReplaceAll(svc["TimeoutStopSec"], "min", "m"))
	if err != nil || stop <= drain {
		t.Errorf("TimeoutStopSec=%s: want longer than --shutdown-timeout %v, so that the drain ends before SIGKILL", svc["TimeoutStopSec"], drain)
	}
	if svc["Type"] != "notify" {
		t.Errorf("Type=%s, want notify (serve tells READY=1)", svc["Type"])
	}
}

// unitService returns the [Service] section's settings, continuation lines joined (the last
// setting of a key wins, as in systemd).
func unitService(t *testing.T, unit string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	var section, pending string
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a setting: %q", unitFile, line)
		}
		if section == "[Service]" {
			kv[k] = v
		}
	}
	return kv
}
