package vfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryAvailable returns the memory the kernel could give the page cache without swapping: the
// MemAvailable of /proc/meminfo (free memory plus the page cache and slab it can reclaim), or,
// in a cgroup (v2) with a memory limit, the limit less what the cgroup holds that cannot be
// reclaimed (its usage less its page cache), if that is less.
func MemoryAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	avail, ok := meminfoField(b, "MemAvailable:")
	if !ok {
		return 0, fmt.Errorf("/proc/meminfo: no MemAvailable")
	}
	if limit, held, ok := cgroupMemory(); ok {
		avail = min(avail, max(limit-held, 0))
	}
	return avail, nil
}

// meminfoField returns the field of /proc/meminfo named name (with its colon), in bytes.
func meminfoField(b []byte, name string) (int64, bool) {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) >= 2 && f[0] == name {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			if len(f) == 3 && f[2] == "kB" {
				n <<= 10
			}
			return n, true
		}
	}
	return 0, false
}

// cgroupMemory returns the memory limit of this process's cgroup (v2) and what it holds that
// the kernel cannot reclaim (memory.current less the page cache of memory.stat's "file"); ok is
// false without a cgroup v2 limit.
func cgroupMemory() (limit, held int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	path, found := "", false
	for _, line := range strings.Split(string(b), "\n") {
		if p, cut := strings.CutPrefix(line, "0::"); cut {
			path, found = p, true
		}
	}
	if !found {
		return 0, 0, false
	}
	dir := filepath.Join("/sys/fs/cgroup", path)
	read := func(name string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b)), err == nil
	}
	lim, ok1 := read("memory.max")
	cur, ok2 := read("memory.current")
	if !ok1 || !ok2 || lim == "max" {
		return 0, 0, false
	}
	limit, err1 := strconv.ParseInt(lim, 10, 64)
	current, err2 := strconv.ParseInt(cur, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	var file int64
	if st, ok := read("memory.stat"); ok {
		file, _ = statField(st, "file")
	}
	return limit, max(current-file, 0), true
}

func statField(stat, name string) (int64, bool) {
	for _, line := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
