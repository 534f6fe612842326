package hugemem

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestHugePageAdvice checks that Slice's memory starts on a huge page boundary and is advised as
// huge-page memory: its mapping carries the "hg" flag (VM_HUGEPAGE) in /proc/self/smaps. Whether
// the kernel then backs it with huge pages depends on its settings and on free memory, so
// AnonHugePages is only logged.
func TestHugePageAdvice(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Skipf("no transparent huge pages: %v", err)
	}
	for _, n := range []int{1, 3 << 20, 16 << 20} {
		b := Slice[byte](n)
		if len(b) != n {
			t.Fatalf("Slice(%d): %d bytes", n, len(b))
		}
		for i := 0; i < n; i += 4096 {
			b[i] = 1 // touch every page
		}
		start := uintptr(unsafe.Pointer(&b[0]))
		if start%PageBytes != 0 {
			t.Errorf("Slice(%d) starts at %#x, not on a huge page boundary", n, start)
		}
		flags, anonHuge, err := smapsEntry(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("THP %s; %d bytes at %#x: VmFlags %s; AnonHugePages %s", strings.TrimSpace(string(mode)), n, start, flags, anonHuge)
		if !strings.Contains(" "+flags+" ", " hg ") {
			t.Errorf("mapping of Slice(%d) lacks the hg flag: VmFlags %q", n, flags)
		}
		// The huge page the slice ends in is advised whole, or its tail would stay on 4 KiB
		// pages (a 1 MiB read buffer there would make two device requests of a direct read).
		last := (start+uintptr(n)+PageBytes-1)&^(PageBytes-1) - 1
		if flags, _, err := smapsEntry(last); err != nil || !strings.Contains(" "+flags+" ", " hg ") {
			t.Errorf("Slice(%d): the end of its last huge page, %#x, is not advised: VmFlags %q, %v", n, last, flags, err)
		}
	}
}

// smapsEntry returns the VmFlags and AnonHugePages lines of the mapping of
// /proc/self/smaps that contains addr.
func smapsEntry(addr uintptr) (flags, anonHuge string, err error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 { // a mapping's first line
			if in {
				break
			}
			in = lo <= addr && addr < hi
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			flags = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			anonHuge = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	if flags == "" {
		return "", "", fmt.Errorf("no mapping of /proc/self/smaps holds %#x", addr)
	}
	return flags, anonHuge, nil
}
