package vfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MemoryAvailable returns the memory the kernel could give the page cache without swapping: the
// MemAvailable of /proc/meminfo (free memory plus the page cache and slab it can reclaim), or,
// in a memory cgroup (v1 or v2) with a limit, the limit less what the cgroup holds that cannot be
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

// cgroupMemory returns the memory limit of this process's cgroup and what it holds that the
// kernel cannot reclaim (its memory less its page cache); ok is false without a limit.
func cgroupMemory() (limit, held int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	return cgroupMemoryAt("/sys/fs/cgroup", string(b))
}

// unlimited is the least memory limit read as none: cgroup v1 writes "no limit" as the largest
// page-aligned int64.
const unlimited = 1 << 62

// cgroupMemoryAt is cgroupMemory for the cgroup hierarchies mounted under root and the process's
// /proc/self/cgroup, self. With cgroup v1's memory controller (a line "N:memory:/path"), the
// limit is memory.stat's hierarchical_memory_limit (the least of the cgroup's and its
// ancestors'), the memory memory.usage_in_bytes, the page cache memory.stat's total_cache. With
// cgroup v2 (the line "0::/path"), memory.max, memory.current and memory.stat's file.
func cgroupMemoryAt(root, self string) (limit, held int64, ok bool) {
	v1, v2 := "", "" // the cgroups' paths, each at least "/" when found
	for _, line := range strings.Split(self, "\n") {
		if p, cut := strings.CutPrefix(line, "0::"); cut {
			v2 = p
		}
		if _, rest, cut := strings.Cut(line, ":"); cut {
			if ctrls, p, cut := strings.Cut(rest, ":"); cut && slices.Contains(strings.Split(ctrls, ","), "memory") {
				v1 = p
			}
		}
	}
	read := func(dir, name string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b)), err == nil
	}
	readInt := func(dir, name string) (int64, bool) {
		s, ok := read(dir, name)
		n, err := strconv.ParseInt(s, 10, 64)
		return n, ok && err == nil // "max" (v2's no limit) does not parse
	}
	var current int64
	var stat, cacheField string
	limOK, curOK := false, false
	switch {
	case v1 != "":
		dir := filepath.Join(root, "memory", v1)
		stat, _ = read(dir, "memory.stat")
		if limit, limOK = statField(stat, "hierarchical_memory_limit"); !limOK {
			limit, limOK = readInt(dir, "memory.limit_in_bytes")
		}
		current, curOK = readInt(dir, "memory.usage_in_bytes")
		cacheField = "total_cache"
	case v2 != "":
		dir := filepath.Join(root, v2)
		limit, limOK = readInt(dir, "memory.max")
		current, curOK = readInt(dir, "memory.current")
		stat, _ = read(dir, "memory.stat")
		cacheField = "file"
	}
	if !limOK || !curOK || limit >= unlimited {
		return 0, 0, false
	}
	file, _ := statField(stat, cacheField)
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
