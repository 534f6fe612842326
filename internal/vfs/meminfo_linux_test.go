package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMemoryAvailable: the figure is /proc/meminfo's MemAvailable (or a cgroup's less), so it
// is positive and at most MemTotal.
func TestMemoryAvailable(t *testing.T) {
	avail, err := MemoryAvailable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	total, ok := meminfoField(b, "MemTotal:")
	if !ok || avail <= 0 || avail > total {
		t.Fatalf("MemoryAvailable %d, MemTotal %d (%v)", avail, total, ok)
	}
}

func TestMeminfoFields(t *testing.T) {
	meminfo := []byte("MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20480000 kB\nHugePages_Total:       0\n")
	for _, tc := range []struct {
		name string
		want int64
		ok   bool
	}{
		{"MemTotal:", 24576000 << 10, true},
		{"MemAvailable:", 20480000 << 10, true},
		{"HugePages_Total:", 0, true},
		{"MemShared:", 0, false},
	} {
		if got, ok := meminfoField(meminfo, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	stat := "anon 1000\nfile 52428800\nkernel 300\nfile_mapped 7\n"
	if got, ok := statField(stat, "file"); got != 52428800 || !ok {
		t.Errorf("memory.stat file: %d, %v", got, ok)
	}
	if _, ok := statField(stat, "shmem"); ok {
		t.Error("memory.stat: found a field it does not have")
	}
}

// TestCgroupMemory reads a cgroup's limit and what it holds outside its page cache from fake
// cgroup v1 and v2 trees: v1's hierarchical limit wins over its own, "no limit" in either
// version is none, and without a memory cgroup there is none.
func TestCgroupMemory(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory/svc/memory.limit_in_bytes", "2147483648")
	write("memory/svc/memory.usage_in_bytes", "1000000000")
	write("memory/svc/memory.stat", "cache 300000000\nhierarchical_memory_limit 1073741824\ntotal_cache 400000000\n")
	write("memory/free/memory.limit_in_bytes", "9223372036854771712")
	write("memory/free/memory.usage_in_bytes", "1000")
	write("memory/free/memory.stat", "hierarchical_memory_limit 9223372036854771712\ntotal_cache 10\n")
	write("svc2/memory.max", "4294967296")
	write("svc2/memory.current", "3000000000")
	write("svc2/memory.stat", "anon 1\nfile 2000000000\n")
	write("free2/memory.max", "max")
	write("free2/memory.current", "5")
	for _, tc := range []struct {
		name, self  string
		limit, held int64
		ok          bool
	}{
		{"v1", "12:pids:/\n4:memory:/svc\n0::/\n", 1 << 30, 600000000, true},
		{"v1 with other controllers on the line", "4:cpu,memory:/svc\n", 1 << 30, 600000000, true},
		{"v1 without a limit", "4:memory:/free\n0::/\n", 0, 0, false},
		{"v2", "0::/svc2\n", 4 << 30, 1000000000, true},
		{"v2 without a limit", "0::/free2\n", 0, 0, false},
		{"no memory cgroup", "3:cpu:/\n", 0, 0, false},
		{"v1 cgroup not mounted", "4:memory:/gone\n", 0, 0, false},
	} {
		limit, held, ok := cgroupMemoryAt(root, tc.self)
		if limit != tc.limit || held != tc.held || ok != tc.ok {
			t.Errorf("%s: limit %d, held %d, %v; want %d, %d, %v", tc.name, limit, held, ok, tc.limit, tc.held, tc.ok)
		}
	}
}
