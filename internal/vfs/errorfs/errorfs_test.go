package errorfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

func setup(t *testing.T) (*FS, string) {
	t.Helper()
	return New(vfs.Default, 1), t.TempDir()
}

func create(t *testing.T, fs *FS, name string) vfs.File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func content(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPassThrough(t *testing.T) {
	fs, dir := setup(t)
	name := filepath.Join(dir, "f")
	f := create(t, fs, name)
	if n, err := f.WritevAt([][]byte{[]byte("hello "), []byte("world")}, 0); n != 11 || err != nil {
		t.Fatalf("WritevAt = %d, %v", n, err)
	}
	a, b := make([]byte, 5), make([]byte, 6)
	if n, err := f.ReadvAt([][]byte{a, b}, 0); n != 11 || err != nil || string(a)+string(b) != "hello world" {
		t.Fatalf("ReadvAt = %d, %v, %q %q", n, err, a, b)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if fs.Injected() != 0 || fs.Ops() == 0 {
		t.Fatalf("injected %d, ops %d", fs.Injected(), fs.Ops())
	}
}

// TestActions checks what each action does to a write and a read of 10 bytes at offset 10.
func TestActions(t *testing.T) {
	data := []byte("0123456789")
	for _, tc := range []struct {
		name      string
		fault     Fault
		wantN     int
		wantErr   error  // nil: success
		wantFile  string // file after the write (20 bytes: 10 zeros, then this)
		wantRead  string // what a read of the written bytes returns, with the fault still on
		readN     int
		readError bool
	}{
		{"fail write", Fault{Ops: OpWrite}, 0, syscall.EIO, "", "", 0, false},
		{"enospc", Fault{Ops: OpWrite, Err: syscall.ENOSPC}, 0, syscall.ENOSPC, "", "", 0, false},
		{"short write", Fault{Ops: OpWrite, Action: Short, Keep: 3}, 3, syscall.EIO, "012", "", 0, false},
		{"short write half", Fault{Ops: OpWrite, Action: Short, Keep: -1}, 5, syscall.EIO, "01234", "", 0, false},
		{"tear", Fault{Ops: OpWrite, Action: Tear, Off: 14}, 4, syscall.EIO, "0123", "", 0, false},
		{"tear before the write", Fault{Ops: OpWrite, Action: Tear, Off: 5}, 0, syscall.EIO, "", "", 0, false},
		{"flip write", Fault{Ops: OpWrite, Action: Flip, Off: 12, Len: 2, Mask: 0x80}, 10, nil, "01\xb2\xb3456789", "01\xb2\xb3456789", 10, false},
		{"ignore write", Fault{Ops: OpWrite, Action: Ignore}, 10, nil, "", "", 0, false},
		{"fail read", Fault{Ops: OpRead}, 10, nil, "0123456789", "", 0, true},
		{"short read", Fault{Ops: OpRead, Action: Short, Keep: 4}, 10, nil, "0123456789", "0123", 4, true},
		{"flip read", Fault{Ops: OpRead, Action: Flip, Off: 19, Mask: 0xff}, 10, nil, "0123456789", "012345678\xc6", 10, false},
		{"range misses", Fault{Ops: OpWrite | OpRead, Off: 20, Len: 5}, 10, nil, "0123456789", "0123456789", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := setup(t)
			name := filepath.Join(dir, "seg")
			f := create(t, fs, name)
			fault := fs.Add(&tc.fault)
			n, err := f.WriteAt(data, 10)
			if n != tc.wantN || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("WriteAt = %d, %v; want %d, %v", n, err, tc.wantN, tc.wantErr)
			}
			if err != nil {
				var pe *os.PathError
				if !errors.As(err, &pe) || pe.Path != name {
					t.Fatalf("error %v does not name the file", err)
				}
			}
			got := content(t, name)
			want := ""
			if tc.wantFile != "" {
				want = string(make([]byte, 10)) + tc.wantFile
			}
			if string(got) != want {
				t.Fatalf("file holds %q, want %q", got, want)
			}
			if tc.wantRead == "" && !tc.readError {
				return
			}
			buf := make([]byte, 10)
			n, err = f.ReadAt(buf, 10)
			if n != tc.readN || (err != nil) != tc.readError || string(buf[:n]) != tc.wantRead {
				t.Fatalf("ReadAt = %d, %v, %q; want %d, error %v, %q", n, err, buf[:n], tc.readN, tc.readError, tc.wantRead)
			}
			if fault.Injected() == 0 && tc.name != "range misses" {
				t.Fatal("fault not counted")
			}
		})
	}
}

func TestVectoredShortAndFlip(t *testing.T) {
	fs, dir := setup(t)
	name := filepath.Join(dir, "f")
	f := create(t, fs, name)
	fault := fs.Add(&Fault{Ops: OpWrite, Action: Short, Keep: 7, Times: 1})
	n, err := f.WritevAt([][]byte{[]byte("abc"), []byte("defg"), []byte("hij")}, 0)
	if n != 7 || err == nil || string(content(t, name)) != "abcdefg" {
		t.Fatalf("short WritevAt = %d, %v, file %q", n, err, content(t, name))
	}
	fs.Drop(fault)
	if _, err := f.WritevAt([][]byte{[]byte("abc"), []byte("defg"), []byte("hij")}, 0); err != nil {
		t.Fatal(err)
	}
	fs.Add(&Fault{Ops: OpRead, Action: Flip, Off: 2, Len: 3, Mask: 0x20})
	a, b := make([]byte, 4), make([]byte, 6)
	if n, err := f.ReadvAt([][]byte{a, b}, 0); n != 10 || err != nil || string(a)+string(b) != "abCDEfghij" {
		t.Fatalf("flipped ReadvAt = %d, %v, %q", n, err, string(a)+string(b))
	}
	if string(content(t, name)) != "abcdefghij" {
		t.Fatal("a read flip reached the file")
	}
}

func TestSkipTimesName(t *testing.T) {
	fs, dir := setup(t)
	seg := create(t, fs, filepath.Join(dir, "0000000001.seg"))
	other := create(t, fs, filepath.Join(dir, "bloom.dat"))
	fault := fs.Add(&Fault{Ops: OpSync, Name: "*.seg", Skip: 2, Times: 2})
	var errs []bool
	for range 6 {
		errs = append(errs, seg.Sync() != nil)
		if err := other.Sync(); err != nil {
			t.Fatalf("sync of a file the fault does not name: %v", err)
		}
	}
	if fmt.Sprint(errs) != "[false false true true false false]" {
		t.Fatalf("failures %v", errs)
	}
	if fault.Injected() != 2 || fs.Injected() != 2 {
		t.Fatalf("injected %d / %d", fault.Injected(), fs.Injected())
	}
}

func TestOpenCreate(t *testing.T) {
	fs, dir := setup(t)
	old := filepath.Join(dir, "old.seg")
	if err := os.WriteFile(old, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs.Add(&Fault{Ops: OpCreate, Name: "*.seg", Err: syscall.ENOSPC})
	if _, err := fs.OpenFile(filepath.Join(dir, "new.seg"), os.O_CREATE|os.O_RDWR, 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create: %v", err)
	}
	f, err := fs.OpenFile(old, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open of an existing file: %v", err)
	}
	f.Close()
}

func TestProbIsSeeded(t *testing.T) {
	run := func() string {
		fs := New(vfs.Default, 42)
		dir := t.TempDir()
		f := create(t, fs, filepath.Join(dir, "f"))
		fs.Add(&Fault{Ops: OpSync, Prob: 0.5})
		var s []byte
		for range 64 {
			if f.Sync() != nil {
				s = append(s, 'x')
			} else {
				s = append(s, '.')
			}
		}
		return string(s)
	}
	a, b := run(), run()
	if a != b || !bytes.Contains([]byte(a), []byte("x")) || !bytes.Contains([]byte(a), []byte(".")) {
		t.Fatalf("runs %s and %s", a, b)
	}
}

func TestCapacity(t *testing.T) {
	fs, dir := setup(t)
	fs.SetCapacity(10000)
	a := create(t, fs, filepath.Join(dir, "a"))
	if err := a.Allocate(0, 6000); err != nil {
		t.Fatal(err)
	}
	// Writing inside allocated space costs nothing.
	if _, err := a.WriteAt(make([]byte, 5000), 0); err != nil {
		t.Fatal(err)
	}
	b := create(t, fs, filepath.Join(dir, "b"))
	if _, err := b.WriteAt(make([]byte, 4000), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt([]byte("x"), 4000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: %v", err)
	}
	if err := a.Allocate(6000, 10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("allocate past capacity: %v", err)
	}
	if fs.Used() != 10000 || fs.Injected() != 2 {
		t.Fatalf("used %d, injected %d", fs.Used(), fs.Injected())
	}
	if err := a.Truncate(1000); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt(make([]byte, 5000), 4000); err != nil {
		t.Fatalf("after a truncate freed space: %v", err)
	}
	if err := fs.Rename(filepath.Join(dir, "b"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if fs.Used() != 9000 {
		t.Fatalf("used %d after renaming over a file", fs.Used())
	}
	if err := fs.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	if fs.Used() != 0 {
		t.Fatalf("used %d after removing everything", fs.Used())
	}
	// A file that existed before it was opened counts from its first open.
	if err := os.WriteFile(filepath.Join(dir, "c"), make([]byte, 700), 0o644); err != nil {
		t.Fatal(err)
	}
	create(t, fs, filepath.Join(dir, "c"))
	if fs.Used() != 700 {
		t.Fatalf("used %d", fs.Used())
	}
}

func TestFSOperations(t *testing.T) {
	fs, dir := setup(t)
	for _, tc := range []struct {
		op  Op
		run func() error
	}{
		{OpMkdir, func() error { return fs.MkdirAll(filepath.Join(dir, "d"), 0o755) }},
		{OpReadDir, func() error { _, err := fs.ReadDir(dir); return err }},
		{OpStat, func() error { _, err := fs.Stat(dir); return err }},
		{OpSyncDir, func() error { return fs.SyncDir(dir) }},
		{OpLock, func() error {
			c, err := fs.Lock(filepath.Join(dir, "LOCK"))
			if err == nil {
				c.Close()
			}
			return err
		}},
		{OpRename, func() error { return fs.Rename(filepath.Join(dir, "nope"), filepath.Join(dir, "x")) }},
		{OpRemove, func() error { return fs.Remove(filepath.Join(dir, "nope")) }},
	} {
		fault := fs.Add(&Fault{Ops: tc.op, Err: syscall.EROFS})
		if err := tc.run(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("op %#x: %v", tc.op, err)
		}
		fs.Drop(fault)
	}
	fs.Clear()
	if err := fs.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestIgnoreSyncAndClose(t *testing.T) {
	fs, dir := setup(t)
	f, err := fs.OpenFile(filepath.Join(dir, "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fs.Add(&Fault{Ops: OpSync | OpTruncate, Action: Ignore})
	fs.Add(&Fault{Ops: OpClose})
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1); err != nil {
		t.Fatal(err)
	}
	if string(content(t, filepath.Join(dir, "f"))) != "abc" {
		t.Fatal("an ignored truncate happened")
	}
	if err := f.Close(); err == nil {
		t.Fatal("close fault not reported")
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("read after close: %v", err)
	}
}

// TestConcurrent runs faults and capacity charges from many goroutines (run under -race).
func TestConcurrent(t *testing.T) {
	fs, dir := setup(t)
	fs.SetCapacity(1 << 30)
	fs.Add(&Fault{Ops: OpWrite | OpRead, Prob: 0.1})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := fs.OpenFile(filepath.Join(dir, fmt.Sprint(g%3)), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			buf := make([]byte, 512)
			for i := range 200 {
				f.WriteAt(buf, int64(i*512))
				f.ReadAt(buf, int64(i*512))
			}
		}()
	}
	wg.Wait()
	if fs.Injected() == 0 {
		t.Fatal("no fault injected")
	}
}

func fill(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }

// TestPowerLoss: after a power loss every sector written since the last sync holds its old or its
// new bytes, the size its old or new value; synced files and synced directory entries stay.
func TestPowerLoss(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(64) {
		fs, dir := setup(t)
		fs.TrackUnsynced(true)
		name := filepath.Join(dir, "f")
		f := create(t, fs, name)
		if _, err := f.WriteAt(fill('A', 1024), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := fs.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		synced := filepath.Join(dir, "synced")
		g := create(t, fs, synced)
		g.WriteAt(fill('S', 700), 0)
		g.Sync()
		fs.SyncDir(dir)
		g.Close()
		if _, err := f.WritevAt([][]byte{fill('B', 1024), fill('C', 1024)}, 0); err != nil {
			t.Fatal(err)
		}
		fresh := filepath.Join(dir, "fresh")
		h := create(t, fs, fresh)
		h.WriteAt(fill('N', 10), 0)
		h.Sync() // its data, not its directory entry
		h.Close()
		f.Close()
		if _, err := fs.PowerLoss(rand.New(rand.NewPCG(seed, 0))); err != nil {
			t.Fatal(err)
		}
		got := content(t, name)
		if len(got) != 1024 && len(got) != 2048 {
			t.Fatalf("seed %d: size %d", seed, len(got))
		}
		state := ""
		for s := 0; s < len(got); s += 512 {
			sec := got[s : s+512]
			switch {
			case s < 1024 && bytes.Equal(sec, fill('A', 512)):
				state += "A"
			case s < 1024 && bytes.Equal(sec, fill('B', 512)):
				state += "B"
			case s >= 1024 && bytes.Equal(sec, fill('C', 512)):
				state += "C"
			case s >= 1024 && bytes.Equal(sec, fill(0, 512)):
				state += "0"
			default:
				t.Fatalf("seed %d: sector %d holds %q...", seed, s/512, sec[:8])
			}
		}
		if _, err := os.Stat(fresh); err == nil {
			state += "+fresh"
		}
		seen[state] = true
		if b := content(t, synced); !bytes.Equal(b, fill('S', 700)) {
			t.Fatalf("seed %d: a synced file changed", seed)
		}
	}
	// Every kind of outcome shows up: all old, all new, torn between sectors, the fresh file
	// there and gone.
	kinds := map[string]bool{}
	for s := range seen {
		base, fresh := strings.CutSuffix(s, "+fresh")
		kinds[fmt.Sprint("fresh ", fresh)] = true
		switch {
		case strings.HasPrefix(base, "AA") && !strings.Contains(base, "C"):
			kinds["old"] = true
		case base == "BBCC":
			kinds["new"] = true
		case strings.Contains(base, "A") && strings.Contains(base, "B"):
			kinds["torn"] = true
		}
	}
	if len(kinds) != 5 {
		t.Fatalf("outcomes %v: kinds %v", seen, kinds)
	}
}

// TestPowerLossLyingSync: a sync that lies leaves the writes before it exposed to a power loss.
func TestPowerLossLyingSync(t *testing.T) {
	lost := false
	for seed := range uint64(16) {
		fs, dir := setup(t)
		fs.TrackUnsynced(true)
		name := filepath.Join(dir, "f")
		f := create(t, fs, name)
		fs.SyncDir(dir)
		fs.Add(&Fault{Ops: OpSync, Action: Ignore})
		f.WriteAt(fill('X', 4096), 0)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fs.PowerLoss(rand.New(rand.NewPCG(seed, 1)))
		if !bytes.Equal(content(t, name), fill('X', 4096)) {
			lost = true
		}
	}
	if !lost {
		t.Fatal("no write was lost behind a lying sync")
	}
}
