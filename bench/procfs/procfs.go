// Package procfs reads the Linux figures the benchmark reports: a process's I/O counters
// (/proc/<pid>/io), the block devices' counters (/proc/diskstats), a process's memory
// (/proc/<pid>/status) and CPU time (/proc/<pid>/stat, for a process other than this one), and
// which device holds a directory. The parsers take an io.Reader so tests feed them fixtures from
// testdata/.
package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// IO is /proc/<pid>/io: what a process asked of the kernel and what reached storage.
type IO struct {
	RChar      int64 `json:"rchar"`       // bytes read by read-like syscalls, page cache or not
	WChar      int64 `json:"wchar"`       // bytes written by write-like syscalls
	SyscR      int64 `json:"syscr"`       // read-like syscalls (read, pread64, readv, ...)
	SyscW      int64 `json:"syscw"`       // write-like syscalls
	ReadBytes  int64 `json:"read_bytes"`  // bytes the process caused to be read from storage
	WriteBytes int64 `json:"write_bytes"` // bytes the process caused to be sent to storage
	Cancelled  int64 `json:"cancelled_write_bytes"`
}

// Sub returns io - o, field by field.
func (x IO) Sub(o IO) IO {
	return IO{x.RChar - o.RChar, x.WChar - o.WChar, x.SyscR - o.SyscR, x.SyscW - o.SyscW,
		x.ReadBytes - o.ReadBytes, x.WriteBytes - o.WriteBytes, x.Cancelled - o.Cancelled}
}

// ParseIO parses the contents of /proc/<pid>/io.
func ParseIO(r io.Reader) (IO, error) {
	var x IO
	fields := map[string]*int64{
		"rchar": &x.RChar, "wchar": &x.WChar, "syscr": &x.SyscR, "syscw": &x.SyscW,
		"read_bytes": &x.ReadBytes, "write_bytes": &x.WriteBytes, "cancelled_write_bytes": &x.Cancelled,
	}
	seen := 0
	s := bufio.NewScanner(r)
	for s.Scan() {
		name, val, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		p, known := fields[strings.TrimSpace(name)]
		if !known {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return IO{}, fmt.Errorf("procfs: io field %s: %w", name, err)
		}
		*p = n
		seen++
	}
	if err := s.Err(); err != nil {
		return IO{}, err
	}
	if seen < len(fields) {
		return IO{}, fmt.Errorf("procfs: io has %d of %d fields", seen, len(fields))
	}
	return x, nil
}

// ReadIO reads /proc/self/io.
func ReadIO() (IO, error) { return readFile("/proc/self/io", ParseIO) }

// Disk is one line of /proc/diskstats: counters of one block device since boot.
type Disk struct {
	Name           string `json:"name"`
	Reads          int64  `json:"reads"` // read requests completed
	ReadsMerged    int64  `json:"reads_merged"`
	SectorsRead    int64  `json:"sectors_read"` // 512-byte sectors, whatever the device's own size
	ReadMillis     int64  `json:"read_ms"`
	Writes         int64  `json:"writes"`
	WritesMerged   int64  `json:"writes_merged"`
	SectorsWritten int64  `json:"sectors_written"`
	WriteMillis    int64  `json:"write_ms"`
}

// Sub returns d - o, field by field (the name is d's).
func (d Disk) Sub(o Disk) Disk {
	return Disk{d.Name, d.Reads - o.Reads, d.ReadsMerged - o.ReadsMerged, d.SectorsRead - o.SectorsRead,
		d.ReadMillis - o.ReadMillis, d.Writes - o.Writes, d.WritesMerged - o.WritesMerged,
		d.SectorsWritten - o.SectorsWritten, d.WriteMillis - o.WriteMillis}
}

// ParseDiskstats parses /proc/diskstats into a map by device name.
func ParseDiskstats(r io.Reader) (map[string]Disk, error) {
	out := make(map[string]Disk)
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 11 {
			return nil, fmt.Errorf("procfs: diskstats line with %d fields: %q", len(f), s.Text())
		}
		var v [8]int64
		for i := range v {
			n, err := strconv.ParseInt(f[3+i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("procfs: diskstats %s field %d: %w", f[2], 4+i, err)
			}
			v[i] = n
		}
		out[f[2]] = Disk{f[2], v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
	}
	return out, s.Err()
}

// ReadDisk reads the counters of device name from /proc/diskstats.
func ReadDisk(name string) (Disk, error) {
	all, err := readFile("/proc/diskstats", ParseDiskstats)
	if err != nil {
		return Disk{}, err
	}
	d, ok := all[name]
	if !ok {
		return Disk{}, fmt.Errorf("procfs: no device %q in /proc/diskstats", name)
	}
	return d, nil
}

// Memory is the resident-set figures of /proc/<pid>/status, in bytes.
type Memory struct {
	RSS     int64 `json:"rss"`      // VmRSS: resident now
	PeakRSS int64 `json:"peak_rss"` // VmHWM: the high-water mark
}

// ParseStatus parses the memory lines of /proc/<pid>/status.
func ParseStatus(r io.Reader) (Memory, error) {
	var m Memory
	seen := 0
	s := bufio.NewScanner(r)
	for s.Scan() {
		name, val, ok := strings.Cut(s.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("procfs: status %s: %q", name, val)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("procfs: status %s: %w", name, err)
		}
		if name == "VmRSS" {
			m.RSS = n << 10
		} else {
			m.PeakRSS = n << 10
		}
		seen++
	}
	if err := s.Err(); err != nil {
		return Memory{}, err
	}
	if seen != 2 {
		return Memory{}, fmt.Errorf("procfs: status has %d of VmRSS, VmHWM", seen)
	}
	return m, nil
}

// ReadMemory reads /proc/self/status.
func ReadMemory() (Memory, error) { return readFile("/proc/self/status", ParseStatus) }

// ReadMemoryOf reads /proc/<pid>/status: the memory of another process (a server under test).
func ReadMemoryOf(pid int) (Memory, error) {
	return readFile(fmt.Sprintf("/proc/%d/status", pid), ParseStatus)
}

// CPU is the CPU time a process used.
type CPU struct {
	User time.Duration `json:"user_ns"`
	Sys  time.Duration `json:"sys_ns"`
}

// Seconds is user plus system time, in seconds.
func (c CPU) Seconds() float64 { return (c.User + c.Sys).Seconds() }

// Sub returns c - o.
func (c CPU) Sub(o CPU) CPU { return CPU{c.User - o.User, c.Sys - o.Sys} }

// userHZ is the unit of the CPU times in /proc/<pid>/stat: fixed at 100 by the Linux ABI,
// whatever the kernel's own tick rate.
const userHZ = 100

// ParseStat returns the user and system time in /proc/<pid>/stat (fields 14 and 15).
func ParseStat(r io.Reader) (CPU, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return CPU{}, err
	}
	// Field 2 is the command name in parentheses, which may hold spaces and parentheses
	// itself: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return CPU{}, fmt.Errorf("procfs: stat without a command name: %q", b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return CPU{}, fmt.Errorf("procfs: stat has %d fields after the command name", len(f))
	}
	var ticks [2]int64
	for j := range ticks {
		n, err := strconv.ParseInt(f[11+j], 10, 64)
		if err != nil {
			return CPU{}, fmt.Errorf("procfs: stat field %d: %w", 14+j, err)
		}
		ticks[j] = n
	}
	tick := time.Second / userHZ
	return CPU{User: time.Duration(ticks[0]) * tick, Sys: time.Duration(ticks[1]) * tick}, nil
}

// ReadCPUOf reads the CPU time of process pid from /proc/<pid>/stat, in ticks of 10 ms. For
// the calling process, ReadCPU is finer.
func ReadCPUOf(pid int) (CPU, error) {
	return readFile(fmt.Sprintf("/proc/%d/stat", pid), ParseStat)
}

// ParseUevent returns DEVNAME from a /sys/dev/block/<major>:<minor>/uevent file.
func ParseUevent(r io.Reader) (string, error) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "DEVNAME="); ok && v != "" {
			return v, nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("procfs: uevent has no DEVNAME")
}

func readFile[T any](name string, parse func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(name)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		return v, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}
