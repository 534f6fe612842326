package procfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseIO(t *testing.T) {
	got, err := ParseIO(open(t, "io"))
	if err != nil {
		t.Fatal(err)
	}
	want := IO{RChar: 6976123, WChar: 2048, SyscR: 10443, SyscW: 12, ReadBytes: 40960000, WriteBytes: 1 << 30, Cancelled: 4096}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	d := got.Sub(IO{SyscR: 443, WriteBytes: 1 << 29})
	if d.SyscR != 10000 || d.WriteBytes != 1<<29 {
		t.Fatalf("Sub: %+v", d)
	}
}

func TestParseIOErrors(t *testing.T) {
	for _, in := range []string{"", "rchar: 1\n", "rchar: x\nwchar: 1\nsyscr: 1\nsyscw: 1\nread_bytes: 1\nwrite_bytes: 1\ncancelled_write_bytes: 1\n"} {
		if _, err := ParseIO(strings.NewReader(in)); err == nil {
			t.Errorf("ParseIO(%q) accepted it", in)
		}
	}
}

func TestParseDiskstats(t *testing.T) {
	all, err := ParseDiskstats(open(t, "diskstats"))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("%d devices, want 4", len(all))
	}
	want := Disk{Name: "vda", Reads: 112692, ReadsMerged: 19194, SectorsRead: 4043514, ReadMillis: 55451,
		Writes: 221964, WritesMerged: 59902, SectorsWritten: 34326432, WriteMillis: 131853}
	if all["vda"] != want {
		t.Fatalf("vda: got %+v, want %+v", all["vda"], want)
	}
	// Old kernels print 11 counters, not 17.
	if all["nvme0n1"].Reads != 3512 || all["nvme0n1"].SectorsRead != 280960 {
		t.Fatalf("nvme0n1: %+v", all["nvme0n1"])
	}
	d := all["vda"].Sub(all["vda1"])
	if d.Name != "vda" || d.Reads != 112692-1200 {
		t.Fatalf("Sub: %+v", d)
	}
}

func TestParseDiskstatsErrors(t *testing.T) {
	for _, in := range []string{"254 0 vda 1 2 3\n", "254 0 vda 1 2 x 4 5 6 7 8 9 10 11\n"} {
		if _, err := ParseDiskstats(strings.NewReader(in)); err == nil {
			t.Errorf("ParseDiskstats(%q) accepted it", in)
		}
	}
}

func TestParseStatus(t *testing.T) {
	got, err := ParseStatus(open(t, "status"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Memory{RSS: 102400 << 10, PeakRSS: 163840 << 10}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := ParseStatus(strings.NewReader("VmRSS:\t12 kB\n")); err == nil {
		t.Fatal("status without VmHWM accepted")
	}
	if _, err := ParseStatus(strings.NewReader("VmRSS:\t12 MB\nVmHWM:\t12 kB\n")); err == nil {
		t.Fatal("status in MB accepted")
	}
}

func TestParseStat(t *testing.T) {
	// The fixture's command name holds spaces and parentheses.
	got, err := ParseStat(open(t, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (CPU{User: 12340 * time.Millisecond, Sys: 5670 * time.Millisecond}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, in := range []string{"", "1 (x) S 1 2 3\n", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 5 0 0\n"} {
		if _, err := ParseStat(strings.NewReader(in)); err == nil {
			t.Errorf("ParseStat(%q) accepted it", in)
		}
	}
}

func TestParseUevent(t *testing.T) {
	got, err := ParseUevent(open(t, "uevent"))
	if err != nil || got != "vda" {
		t.Fatalf("got %q, %v; want vda", got, err)
	}
	if _, err := ParseUevent(strings.NewReader("MAJOR=1\n")); err == nil {
		t.Fatal("uevent without DEVNAME accepted")
	}
}

// The live files parse on this machine.
func TestLive(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io")
	}
	if _, err := ReadIO(); err != nil {
		t.Error(err)
	}
	if m, err := ReadMemory(); err != nil || m.RSS <= 0 || m.PeakRSS < m.RSS {
		t.Errorf("memory %+v, %v", m, err)
	}
	if m, err := ReadMemoryOf(os.Getpid()); err != nil || m.RSS <= 0 {
		t.Errorf("memory of pid %d: %+v, %v", os.Getpid(), m, err)
	}
	if c, err := ReadCPUOf(os.Getpid()); err != nil || c.User < 0 || c.Sys < 0 {
		t.Errorf("CPU of pid %d: %+v, %v", os.Getpid(), c, err)
	}
	dev, err := DeviceOf(t.TempDir())
	if err != nil {
		t.Skipf("no block device for the temp dir: %v", err)
	}
	if _, err := ReadDisk(dev); err != nil {
		t.Error(err)
	}
}
