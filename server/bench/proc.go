package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: fixed at 100 by the Linux ABI.
const userHZ = 100

// ProcSample is a process's resource use at one moment.
type ProcSample struct {
	RSS int64         // resident set, bytes
	CPU time.Duration // user and system time so far
}

// SampleProc reads /proc/<pid>/stat and status.
func SampleProc(pid int) (ProcSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcSample{}, err
	}
	// The command name is in parentheses and may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return ProcSample{}, fmt.Errorf("bench: cannot parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return ProcSample{}, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of stat
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return ProcSample{}, fmt.Errorf("bench: bad CPU times in /proc/%d/stat", pid)
	}
	s := ProcSample{CPU: time.Duration(utime+stime) * time.Second / userHZ}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcSample{}, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return ProcSample{}, fmt.Errorf("bench: bad VmRSS %q", v)
			}
			s.RSS = kb << 10
		}
	}
	return s, nil
}
