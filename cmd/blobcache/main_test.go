package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// cli runs the command in-process, as main would, and returns what it printed and run's error.
func cli(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(args, bytes.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustCLI is cli for a command that must succeed.
func mustCLI(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, errOut, err := cli(t, stdin, args...)
	if err != nil {
		t.Fatalf("blobcache %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// binaryValue returns n pseudo-random bytes, a quarter of them NUL, from a fixed seed.
func binaryValue(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		if r.IntN(4) == 0 {
			continue // NUL
		}
		b[i] = byte(r.Uint32())
	}
	return b
}

// snapshot maps every file under dir to a digest of its contents, so a test can tell that a
// command changed nothing. A missing dir is an empty snapshot.
func snapshot(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	m := make(map[string][sha256.Size]byte)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			m[rel+"/"] = [sha256.Size]byte{}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameSnapshot(t *testing.T, what string, before, after map[string][sha256.Size]byte) {
	t.Helper()
	for name, sum := range before {
		if got, ok := after[name]; !ok {
			t.Errorf("%s removed %s", what, name)
		} else if got != sum {
			t.Errorf("%s changed %s", what, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s created %s", what, name)
		}
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	values := []struct {
		name  string
		value []byte
	}{
		{"empty", nil},
		{"text", []byte("hello, blobcache\n")},
		{"only-NULs", make([]byte, 4096)},
		{"binary-small", binaryValue(10_000, 1)},
		// Past 1 MiB the reader streams from the segment instead of reading the record at once.
		{"binary-large", binaryValue(3<<20+17, 2)},
	}
	for _, v := range values {
		t.Run(v.name, func(t *testing.T) {
			stdinKey, fileKey := "stdin/"+v.name, "file/"+v.name
			out := mustCLI(t, v.value, "put", "--dir", dir, stdinKey)
			if want := fmt.Sprintf("stored %q: %d bytes\n", stdinKey, len(v.value)); out != want {
				t.Errorf("put from stdin printed %q, want %q", out, want)
			}

			file := filepath.Join(t.TempDir(), "value")
			if err := os.WriteFile(file, v.value, 0o644); err != nil {
				t.Fatal(err)
			}
			// stdin is ignored when a file is named.
			mustCLI(t, []byte("not this"), "put", "--dir", dir, fileKey, file)

			for _, key := range []string{stdinKey, fileKey} {
				got := mustCLI(t, nil, "get", "--dir", dir, key)
				if !bytes.Equal([]byte(got), v.value) {
					t.Errorf("get %s: %d bytes differ from the %d put", key, len(got), len(v.value))
				}
			}
		})
	}
}

func TestPutDashReadsStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("from stdin\x00\n"), "put", "--dir", dir, "k", "-")
	if got := mustCLI(t, nil, "get", "--dir", dir, "k"); got != "from stdin\x00\n" {
		t.Errorf("get = %q", got)
	}
}

func TestPutOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("first"), "put", "--dir", dir, "k")
	mustCLI(t, []byte("second, longer"), "put", "--dir", dir, "k")
	if got := mustCLI(t, nil, "get", "--dir", dir, "k"); got != "second, longer" {
		t.Errorf("get after overwrite = %q", got)
	}
}

func TestPutMissingFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cache")
	_, _, err := cli(t, nil, "put", "--dir", dir, "k", filepath.Join(t.TempDir(), "no-such-file"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("put of a missing file: err = %v, want one wrapping fs.ErrNotExist", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("put of a missing file created the cache directory (stat: %v)", err)
	}
}

func TestDelThenGet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("doomed"), "put", "--dir", dir, "k")
	mustCLI(t, []byte("kept"), "put", "--dir", dir, "other")
	if out := mustCLI(t, nil, "del", "--dir", dir, "k"); out != "" {
		t.Errorf("del printed %q", out)
	}
	out, _, err := cli(t, nil, "get", "--dir", dir, "k")
	if !errors.Is(err, blobcache.ErrNotFound) {
		t.Fatalf("get after del: err = %v, want one wrapping ErrNotFound", err)
	}
	if out != "" {
		t.Errorf("get after del printed %q", out)
	}
	if got := mustCLI(t, nil, "get", "--dir", dir, "other"); got != "kept" {
		t.Errorf("get of the other key = %q", got)
	}
	// Deleting a key the cache does not hold is not an error.
	mustCLI(t, nil, "del", "--dir", dir, "never-stored")
}

func TestGetMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("v"), "put", "--dir", dir, "something")
	out, _, err := cli(t, nil, "get", "--dir", dir, "nothing")
	if !errors.Is(err, blobcache.ErrNotFound) {
		t.Fatalf("get of a missing key: err = %v, want one wrapping ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), `"nothing"`) {
		t.Errorf("error %q does not name the key", err)
	}
	if out != "" {
		t.Errorf("get of a missing key printed %q", out)
	}
}

func TestStat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 3 {
		mustCLI(t, binaryValue(1000, uint64(i)), "put", "--dir", dir, fmt.Sprint("key", i))
	}
	out := mustCLI(t, nil, "stat", "--dir", dir)
	fields := make(map[string]string)
	for line := range strings.Lines(out) {
		// "name with spaces   value": the name ends at the first run of two spaces.
		name, value, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Errorf("stat line %q has no value", line)
			continue
		}
		fields[name] = strings.TrimSpace(value)
	}
	for _, name := range []string{"segments", "blobs", "disk bytes", "index memory", "bloom memory", "bloom fill", "bloom est. FPR"} {
		if _, ok := fields[name]; !ok {
			t.Errorf("stat has no %q line:\n%s", name, out)
		}
	}
	if got := fields["blobs"]; got != "3" {
		t.Errorf("stat blobs = %q, want 3:\n%s", got, out)
	}
	if got := fields["segments"]; got == "0" || got == "" {
		t.Errorf("stat segments = %q, want at least 1:\n%s", got, out)
	}
}

func TestStatEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A reading command creates nothing: an empty directory is no cache.
	if _, _, err := cli(t, nil, "stat", "--dir", dir); !errors.Is(err, blobcache.ErrNoCache) {
		t.Fatalf("stat of an empty directory: %v, want ErrNoCache", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("stat wrote into an empty directory: %v", ents)
	}
	// del creates nothing either; an empty cache comes from the library.
	if _, _, err := cli(t, nil, "del", "--dir", dir, "k"); !errors.Is(err, blobcache.ErrNoCache) {
		t.Fatalf("del in an empty directory: %v, want ErrNoCache", err)
	}
	emptyCache(t, dir)
	out := mustCLI(t, nil, "stat", "--dir", dir)
	if !strings.Contains(out, "blobs             0\n") || !strings.Contains(out, "segments          0\n") {
		t.Errorf("stat of an empty cache:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("v"), "put", "--dir", dir, "k")
	fresh := filepath.Join(t.TempDir(), "fresh")
	for _, args := range [][]string{
		{},
		{"frobnicate", "--dir", dir},
		{"frobnicate"},
		{"put", "--dir", dir},
		{"put", "--dir", dir, "k", "file", "extra"},
		{"get", "--dir", dir},
		{"get", "--dir", dir, "k", "extra"},
		{"del", "--dir", dir},
		{"del", "--dir", dir, "k", "extra"},
		{"stat", "--dir", dir, "extra"},
		{"verify", "--dir", dir, "extra"},
		{"get", "--no-such-flag", "--dir", dir, "k"},
		{"get", "--dir"},
		{"put", "--dir", fresh},
		{"stat", "--dir", fresh, "extra"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			before := snapshot(t, dir)
			out, errOut, err := cli(t, []byte("would be stored"), args...)
			if err != exitError(2) {
				t.Errorf("err = %v, want exit status 2", err)
			}
			if out != "" {
				t.Errorf("printed %q to stdout", out)
			}
			if !strings.Contains(strings.ToLower(errOut), "usage") {
				t.Errorf("stderr does not show the usage:\n%s", errOut)
			}
			sameSnapshot(t, "a usage error", before, snapshot(t, dir))
			if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a usage error created %s", fresh)
			}
		})
	}
	if got := mustCLI(t, nil, "get", "--dir", dir, "k"); got != "v" {
		t.Errorf("after the usage errors, get k = %q, want %q", got, "v")
	}
}

// TestHelp: help asked for is the answer, on standard output, exit 0, and a command's help
// shows its arguments; no command at all is a usage error, on standard error.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"put", "--help"}, {"get", "-h"}} {
		out, errOut, err := cli(t, nil, args...)
		if err != nil {
			t.Errorf("blobcache %v: err = %v, want nil", args, err)
		}
		if errOut != "" || !strings.HasPrefix(out, "usage: blobcache") {
			t.Errorf("blobcache %v: stdout %q, stderr %q", args, out, errOut)
		}
	}
	if out, _, _ := cli(t, nil, "put", "--help"); !strings.Contains(out, "KEY [FILE]") {
		t.Errorf("put --help does not show its arguments: %q", out)
	}
	if out, errOut, err := cli(t, nil); err == nil || out != "" || !strings.HasPrefix(errOut, "usage: blobcache") {
		t.Errorf("blobcache with no command: %v, stdout %q, stderr %q", err, out, errOut)
	}
}

func TestDefaultDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BLOBCACHE_DIR", dir)
	mustCLI(t, []byte("via env"), "put", "k")
	if got := mustCLI(t, nil, "get", "--dir", dir, "k"); got != "via env" {
		t.Errorf("get from $BLOBCACHE_DIR = %q", got)
	}
}

func TestVerifyClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("one"), "put", "--dir", dir, "a")
	mustCLI(t, binaryValue(2<<20, 3), "put", "--dir", dir, "b")
	mustCLI(t, nil, "del", "--dir", dir, "a")
	before := snapshot(t, dir)
	out, errOut, err := cli(t, nil, "verify", "--dir", dir)
	if err != nil {
		t.Fatalf("verify of a clean cache: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	// Three segments (each command that writes opens its own), two puts and a tombstone.
	if want := "verified 3 segments, 3 records (0 freed records skipped), "; !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "; 0 corrupt\n") {
		t.Errorf("verify printed %q, want %q...%q", out, want, "; 0 corrupt\n")
	}
	if strings.Contains(out, "CORRUPT") {
		t.Errorf("verify of a clean cache reports corruption:\n%s", out)
	}
	if errOut != "" {
		t.Errorf("verify drew progress on a stderr that is not a terminal: %q", errOut)
	}
	var bar strings.Builder
	draw := progressBar(&bar)
	draw(0, 100)
	draw(100, 100)
	if !strings.Contains(bar.String(), "100.0%") {
		t.Errorf("the progress bar does not reach 100%%: %q", bar.String())
	}
	sameSnapshot(t, "verify", before, snapshot(t, dir))
}

func TestVerifyEmptyCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	emptyCache(t, dir)
	out := mustCLI(t, nil, "verify", "--dir", dir)
	if !strings.HasPrefix(out, "verified 0 segments, 0 records (0 freed records skipped), ") {
		t.Errorf("verify of an empty cache: %q", out)
	}
}

// flipValueByte finds value in the cache's segment files and flips one byte in its middle. It
// returns the segment file's name and the offset of the record that holds the value.
func flipValueByte(t *testing.T, dir, key string, value []byte) (file string, recordOff int64) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment files in %s (%v)", dir, err)
	}
	for _, path := range segs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, value)
		if i < 0 {
			continue
		}
		if bytes.Contains(b[i+1:], value) {
			t.Fatalf("value found twice in %s", path)
		}
		b[i+len(value)/2] ^= 0x5a
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Base(path), int64(i - record.HeaderSize - len(key))
	}
	t.Fatalf("value not found in %v", segs)
	return "", 0
}

func TestVerifyFlippedValueByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustCLI(t, []byte("an innocent bystander"), "put", "--dir", dir, "before")
	key, value := "victim", []byte("the value whose middle byte gets flipped on disk")
	mustCLI(t, value, "put", "--dir", dir, key)
	mustCLI(t, []byte("another bystander"), "put", "--dir", dir, "after")
	// Every command has closed the cache, so the segments are sealed and at rest.
	file, off := flipValueByte(t, dir, key, value)

	before := snapshot(t, dir)
	out, errOut, err := cli(t, nil, "verify", "--dir", dir)
	if err != exitError(1) {
		t.Fatalf("verify of a damaged cache: err = %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	var corrupt []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "CORRUPT") {
			corrupt = append(corrupt, line)
		}
	}
	if len(corrupt) != 1 {
		t.Fatalf("want one CORRUPT line, got %d:\n%s", len(corrupt), out)
	}
	if want := fmt.Sprintf("CORRUPT %s offset %d: ", file, off); !strings.HasPrefix(corrupt[0], want) {
		t.Errorf("CORRUPT line %q, want it to start %q", corrupt[0], want)
	}
	if !strings.Contains(corrupt[0], "checksum mismatch") {
		t.Errorf("CORRUPT line %q does not say checksum mismatch", corrupt[0])
	}
	if !strings.Contains(out, "2 records") || !strings.HasSuffix(out, "; 1 corrupt\n") {
		t.Errorf("verify summary:\n%s", out)
	}
	sameSnapshot(t, "verify", before, snapshot(t, dir))

	// The damaged blob is never handed out; the others still are.
	got, _, err := cli(t, nil, "get", "--dir", dir, key)
	if !errors.Is(err, blobcache.ErrChecksumMismatch) {
		t.Errorf("get of the damaged blob: err = %v, want one wrapping ErrChecksumMismatch", err)
	}
	if got != "" {
		t.Errorf("get of the damaged blob printed %q", got)
	}
	if got := mustCLI(t, nil, "get", "--dir", dir, "after"); got != "another bystander" {
		t.Errorf("get of an undamaged blob = %q", got)
	}
}

func TestVerifyNotBlobCache(t *testing.T) {
	t.Parallel()
	t.Run("foreign", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, dir)
		out, _, err := cli(t, nil, "verify", "--dir", dir)
		if !errors.Is(err, blobcache.ErrNotBlobCache) {
			t.Errorf("verify of a foreign directory: err = %v, want one wrapping ErrNotBlobCache", err)
		}
		if err != nil && !strings.Contains(err.Error(), dir) {
			t.Errorf("error %q does not name the directory", err)
		}
		if out != "" {
			t.Errorf("verify printed %q", out)
		}
		// The other commands refuse it too, and leave it as it was.
		for _, args := range [][]string{{"get", "--dir", dir, "k"}, {"put", "--dir", dir, "k"}, {"stat", "--dir", dir}} {
			if _, _, err := cli(t, []byte("v"), args...); !errors.Is(err, blobcache.ErrNotBlobCache) {
				t.Errorf("%s: err = %v, want one wrapping ErrNotBlobCache", args[0], err)
			}
		}
		sameSnapshot(t, "commands on a foreign directory", before, snapshot(t, dir))
	})
	t.Run("missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nowhere")
		if _, _, err := cli(t, nil, "verify", "--dir", dir); !errors.Is(err, blobcache.ErrNotBlobCache) {
			t.Errorf("verify of a missing directory: err = %v, want one wrapping ErrNotBlobCache", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("verify created %s", dir)
		}
	})
}

// TestBinary builds the command and runs the README's first command sequence through it, then
// checks the exit statuses main turns run's errors into.
func TestBinary(t *testing.T) {
	t.Parallel()
	exe := buildBinary(t)
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BLOBCACHE_DIR=") {
			env = append(env, kv)
		}
	}
	// blobcache runs the binary in cwd and returns its output and exit status.
	blobcache := func(cwd string, stdin string, args ...string) (stdout, stderr string, status int) {
		t.Helper()
		cmd := exec.Command(exe, args...)
		cmd.Dir = cwd
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			status = ee.ExitCode()
		case err != nil:
			t.Fatalf("run %s: %v", strings.Join(args, " "), err)
		}
		return out.String(), errOut.String(), status
	}
	readme := func(t *testing.T, cwd string, dirArgs ...string) {
		// echo "hello, blobcache" | blobcache put greeting && blobcache get greeting && blobcache stat
		args := func(cmd string, rest ...string) []string {
			return append(append([]string{cmd}, dirArgs...), rest...)
		}
		out, errOut, st := blobcache(cwd, "hello, blobcache\n", args("put", "greeting")...)
		if st != 0 || out != "stored \"greeting\": 17 bytes\n" {
			t.Fatalf("put: status %d, stdout %q, stderr %q", st, out, errOut)
		}
		out, errOut, st = blobcache(cwd, "", args("get", "greeting")...)
		if st != 0 || out != "hello, blobcache\n" {
			t.Fatalf("get: status %d, stdout %q, stderr %q", st, out, errOut)
		}
		out, errOut, st = blobcache(cwd, "", args("stat")...)
		if st != 0 || !strings.Contains(out, "segments          1\n") || !strings.Contains(out, "blobs             1\n") ||
			!strings.Contains(out, "bloom fill") {
			t.Fatalf("stat: status %d, stdout %q, stderr %q", st, out, errOut)
		}
	}

	t.Run("README-dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cache")
		readme(t, t.TempDir(), "--dir", dir)
		if _, err := os.Stat(filepath.Join(dir, "BLOBCACHE")); err != nil {
			t.Errorf("no identity file in --dir: %v", err)
		}
	})
	t.Run("README-default-dir", func(t *testing.T) {
		cwd := t.TempDir()
		readme(t, cwd)
		if _, err := os.Stat(filepath.Join(cwd, "blobcache-data", "BLOBCACHE")); err != nil {
			t.Errorf("no cache in ./blobcache-data: %v", err)
		}
	})
	t.Run("exit-status", func(t *testing.T) {
		cwd, dir := t.TempDir(), t.TempDir()
		if _, errOut, st := blobcache(cwd, "", "frobnicate", "--dir", dir); st != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("unknown command: status %d, stderr %q", st, errOut)
		}
		key, value := "k", "a value to damage on disk"
		if _, errOut, st := blobcache(cwd, value, "put", "--dir", dir, key); st != 0 {
			t.Fatalf("put: status %d, stderr %q", st, errOut)
		}
		if _, errOut, st := blobcache(cwd, "", "get", "--dir", dir, "missing"); st != 1 || !strings.Contains(errOut, "not found") {
			t.Errorf("get of a missing key: status %d, stderr %q", st, errOut)
		}
		if out, errOut, st := blobcache(cwd, "", "verify", "--dir", dir); st != 0 || !strings.HasSuffix(out, "; 0 corrupt\n") {
			t.Errorf("verify of a clean cache: status %d, stdout %q, stderr %q", st, out, errOut)
		}
		flipValueByte(t, dir, key, []byte(value))
		out, errOut, st := blobcache(cwd, "", "verify", "--dir", dir)
		if st != 1 || !strings.Contains(out, "CORRUPT ") {
			t.Errorf("verify of a damaged cache: status %d, stdout %q", st, out)
		}
		// verify has reported; main must not add "blobcache: exit status 1".
		if strings.Contains(errOut, "exit status") {
			t.Errorf("verify stderr ends with noise: %q", errOut)
		}
	})
	// onePrefix fails unless every line of stderr says "blobcache:" at most once.
	onePrefix := func(t *testing.T, what, errOut string) {
		t.Helper()
		for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if strings.Count(line, "blobcache:") > 1 {
				t.Errorf("%s: a doubled prefix: %q", what, line)
			}
		}
	}
	t.Run("help-and-usage", func(t *testing.T) {
		cwd := t.TempDir()
		for _, args := range [][]string{{"--help"}, {"help"}, {"put", "-h"}, {"get", "--help"}} {
			out, errOut, st := blobcache(cwd, "", args...)
			if st != 0 || !strings.Contains(out, "usage: blobcache") || errOut != "" {
				t.Errorf("%v: status %d, stdout %q, stderr %q", args, st, out, errOut)
			}
		}
		if out, _, _ := blobcache(cwd, "", "put", "-h"); !strings.Contains(out, "KEY [FILE]") || !strings.Contains(out, "-ttl") || !strings.Contains(out, "-segment-size") {
			t.Errorf("put -h: %q", out)
		}
		if out, _, _ := blobcache(cwd, "", "--help"); !strings.Contains(out, "exit status: 0 ok, 1 a miss") {
			t.Errorf("--help does not document the exit status: %q", out)
		}
		for _, args := range [][]string{{}, {"get"}, {"put"}, {"stat", "extra"}, {"get", "--nope", "k"}, {"version", "x"}} {
			out, errOut, st := blobcache(cwd, "", args...)
			if st != 2 || out != "" || !strings.Contains(errOut, "usage") {
				t.Errorf("%v: status %d, stdout %q, stderr %q; want 2, nothing, a usage", args, st, out, errOut)
			}
		}
		if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
			t.Errorf("help and usage errors created %v", ents)
		}
	})
	t.Run("version", func(t *testing.T) {
		out, errOut, st := blobcache(t.TempDir(), "", "version")
		if st != 0 || !strings.HasPrefix(out, "blobcache ") || !strings.Contains(out, "go1.") || errOut != "" {
			t.Errorf("version: status %d, stdout %q, stderr %q", st, out, errOut)
		}
	})
	t.Run("no-cache", func(t *testing.T) {
		cwd := t.TempDir()
		missing := filepath.Join(t.TempDir(), "nope")
		for _, cmd := range []string{"get", "stat", "verify", "del"} {
			args := []string{cmd, "--dir", missing}
			if cmd == "get" || cmd == "del" {
				args = append(args, "k")
			}
			_, errOut, st := blobcache(cwd, "", args...)
			if st != 1 || !strings.Contains(errOut, "no cache at "+missing) && !(cmd == "verify" && strings.Contains(errOut, missing)) {
				t.Errorf("%s of a missing directory: status %d, stderr %q", cmd, st, errOut)
			}
			onePrefix(t, cmd, errOut)
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s created %s", cmd, missing)
			}
		}
		if _, errOut, st := blobcache(cwd, "v", "put", "--dir", missing, "k"); st != 0 || !strings.Contains(errOut, "created a new cache at "+missing) {
			t.Errorf("put into a missing directory: status %d, stderr %q", st, errOut)
		}
		if _, errOut, _ := blobcache(cwd, "w", "put", "--dir", missing, "k"); strings.Contains(errOut, "created") {
			t.Errorf("put into an existing cache says it created one: %q", errOut)
		}
	})
	t.Run("read-only-directory", func(t *testing.T) {
		// A directory the user may read but not write: as an unprivileged user when the test
		// runs as root (root ignores file modes), as this user otherwise.
		base, err := os.MkdirTemp("", "blobcache-ro-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { chmodTree(base, true); os.RemoveAll(base) })
		dir := filepath.Join(base, "cache")
		if _, errOut, st := blobcache(base, "read me", "put", "--dir", dir, "k"); st != 0 {
			t.Fatalf("put: %d %q", st, errOut)
		}
		roExe := filepath.Join(base, "blobcache")
		if b, err := os.ReadFile(exe); err != nil || os.WriteFile(roExe, b, 0o755) != nil {
			t.Fatal("copy the binary")
		}
		chmodTree(base, false)
		before := snapshot(t, dir)
		as := "this user"
		run := func(args ...string) (string, string, int) {
			cmd := exec.Command(roExe, args...)
			cmd.Dir, cmd.Env = base, env
			if os.Geteuid() == 0 {
				as = "uid 65534"
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			st := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				st = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("run %v: %v", args, err)
			}
			return out.String(), errOut.String(), st
		}
		if out, errOut, st := run("get", "--dir", dir, "k"); st != 0 || out != "read me" {
			t.Errorf("get from a read-only directory as %s: status %d, stdout %q, stderr %q", as, st, out, errOut)
		}
		if out, errOut, st := run("stat", "--dir", dir); st != 0 || !strings.Contains(out, "blobs             1\n") {
			t.Errorf("stat of a read-only directory as %s: status %d, stdout %q, stderr %q", as, st, out, errOut)
		}
		if out, errOut, st := run("verify", "--dir", dir); st != 0 || !strings.HasSuffix(out, "; 0 corrupt\n") {
			t.Errorf("verify of a read-only directory as %s: status %d, stdout %q, stderr %q", as, st, out, errOut)
		}
		_, errOut, st := run("put", "--dir", dir, "k2")
		if st != 1 || !strings.Contains(errOut, dir) {
			t.Errorf("put into a read-only directory as %s: status %d, stderr %q; want 1 and the path", as, st, errOut)
		}
		onePrefix(t, "put", errOut)
		sameSnapshot(t, "reads of a read-only directory", before, snapshot(t, dir))
	})
	t.Run("stray-files", func(t *testing.T) {
		cwd := t.TempDir()
		dir := filepath.Join(cwd, "cache")
		blobcache(cwd, "v", "put", "--dir", dir, "k")
		strays := map[string]string{
			filepath.Join(dir, "notes.txt"):                  "mine",
			filepath.Join(dir, "segments", "foo.txt"):        "mine too",
			filepath.Join(dir, "segments", "0000000099.seg"): "not a segment",
		}
		for p, v := range strays {
			os.WriteFile(p, []byte(v), 0o644)
		}
		if out, errOut, st := blobcache(cwd, "", "get", "--dir", dir, "k"); st != 0 || out != "v" {
			t.Errorf("get beside stray files: status %d, stdout %q, stderr %q", st, out, errOut)
		}
		if out, _, st := blobcache(cwd, "", "stat", "--dir", dir); st != 0 || !strings.Contains(out, "stray files       3") {
			t.Errorf("stat beside stray files: status %d, stdout %q", st, out)
		}
		for p, v := range strays {
			if b, err := os.ReadFile(p); err != nil || string(b) != v {
				t.Errorf("a read command changed stray %s: %q, %v", p, b, err)
			}
		}
	})
	t.Run("locked", func(t *testing.T) {
		cwd := t.TempDir()
		dir := filepath.Join(cwd, "cache")
		serve := startServeProcess(t, exe, env, dir)
		defer func() { serve.cmd.Process.Signal(syscall.SIGTERM); serve.cmd.Wait() }()
		// verify reads the files without opening the cache: it runs beside the writer.
		if out, errOut, st := blobcache(cwd, "", "verify", "--dir", dir); st != 0 || !strings.HasSuffix(out, "; 0 corrupt\n") {
			t.Errorf("verify beside a running server: status %d, stdout %q, stderr %q", st, out, errOut)
		}
		for _, args := range [][]string{{"get", "--dir", dir, "k"}, {"stat", "--dir", dir}, {"put", "--dir", dir, "k"}} {
			_, errOut, st := blobcache(cwd, "v", args...)
			if st != 1 || !strings.Contains(errOut, "locked") || !strings.Contains(errOut, dir) {
				t.Errorf("%v beside a running server: status %d, stderr %q", args, st, errOut)
			}
			onePrefix(t, args[0], errOut)
		}
	})
	t.Run("value-limit", func(t *testing.T) {
		cwd := t.TempDir()
		dir := filepath.Join(cwd, "cache")
		big := filepath.Join(cwd, "big")
		if err := os.WriteFile(big, make([]byte, 9<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, st := blobcache(cwd, "", "put", "--dir", dir, "--segment-size", "8M", "big", big)
		m := regexp.MustCompile(`over the (\d+) bytes`).FindStringSubmatch(errOut)
		if st != 1 || m == nil || !strings.Contains(errOut, "--segment-size") {
			t.Fatalf("a value over the limit: status %d, stderr %q", st, errOut)
		}
		onePrefix(t, "put", errOut)
		limit, _ := strconv.Atoi(m[1])
		if err := os.WriteFile(big, make([]byte, limit), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, errOut, st := blobcache(cwd, "", "put", "--dir", dir, "--segment-size", "8M", "big", big); st != 0 {
			t.Errorf("a value at the limit (%d bytes): status %d, stderr %q", limit, st, errOut)
		}
		if _, errOut, st := blobcache(cwd, "", "put", "--dir", dir, "--segment-size", "16M", "big2", big); st != 0 {
			t.Errorf("--segment-size 16M: status %d, stderr %q", st, errOut)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		cwd := t.TempDir()
		dir := filepath.Join(cwd, "cache")
		if _, errOut, st := blobcache(cwd, "soon gone", "put", "--dir", dir, "--ttl", "1s", "k"); st != 0 {
			t.Fatalf("put --ttl: %d %q", st, errOut)
		}
		if out, _, st := blobcache(cwd, "", "get", "--dir", dir, "k"); st != 0 || out != "soon gone" {
			t.Fatalf("get before the expiry: %d %q", st, out)
		}
		time.Sleep(1200 * time.Millisecond)
		if _, errOut, st := blobcache(cwd, "", "get", "--dir", dir, "k"); st != 1 || !strings.Contains(errOut, "not found") {
			t.Errorf("get after the expiry: status %d, stderr %q", st, errOut)
		}
		if _, errOut, st := blobcache(cwd, "", "put", "--dir", dir, "--ttl", "-1s", "k"); st != 2 {
			t.Errorf("a negative --ttl: status %d, stderr %q", st, errOut)
		}
	})

}

// TestVerifyAfterOverwriteAndDelete: overwriting or deleting a blob frees its old record, whose
// whole 4 KiB blocks are punched out once its segment is sealed. Those records are dead, not
// damaged, so verify of such a cache must still pass.
func TestVerifyAfterOverwriteAndDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := func(seed uint64) []byte { return binaryValue(64<<10, seed) }
	mustCLI(t, big(1), "put", "--dir", dir, "overwritten")
	mustCLI(t, big(2), "put", "--dir", dir, "deleted")
	mustCLI(t, big(3), "put", "--dir", dir, "overwritten")
	mustCLI(t, nil, "del", "--dir", dir, "deleted")
	if got := mustCLI(t, nil, "get", "--dir", dir, "overwritten"); got != string(big(3)) {
		t.Fatal("get after overwrite returned other bytes")
	}
	out, errOut, err := cli(t, nil, "verify", "--dir", dir)
	if err != nil || !strings.HasSuffix(out, "; 0 corrupt\n") {
		t.Errorf("verify after overwrite and delete: err = %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// TestReportOnePrefix: an error printed for the user says "blobcache:" once, however many
// layers of the library wrapped it.
func TestReportOnePrefix(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("blobcache: %s: %w", "/tmp/x", blobcache.ErrLocked),
		fmt.Errorf("%q: %w", "k1", blobcache.ErrNotFound),
	} {
		var b strings.Builder
		report(&b, err)
		if got := b.String(); strings.Count(got, "blobcache:") != 1 || !strings.HasPrefix(got, "blobcache: ") {
			t.Errorf("report(%v) = %q", err, got)
		}
	}
}

// chmodTree makes every directory and file under root writable again (w) or read-only for
// everyone (directories 0555, files 0444).
func chmodTree(root string, w bool) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		mode := os.FileMode(0o444)
		if d.IsDir() {
			mode = 0o555
		}
		if w {
			mode |= 0o200
		}
		if d.Name() == "blobcache" && !d.IsDir() {
			mode |= 0o111
		}
		os.Chmod(p, mode)
		return nil
	})
}

// emptyCache makes dir an empty cache.
func emptyCache(t *testing.T, dir string) {
	t.Helper()
	c, err := blobcache.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
