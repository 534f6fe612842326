package vfs

import (
	"os"
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
