package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// TestRecoveryScenarios runs the scripts in testdata/recovery: each states a directory's history
// (puts, deletes, crashes, faults, damaged bytes) and what recovery and reads make of it. Every
// file gets its own directory and errorfs; the cache is opened with small() and a flush interval
// of an hour, so batches are cut only by drain, flush, cut, close or a full write buffer, and the
// layout of every file is the same from run to run.
//
// Regenerate the expected output with
//
//	go test -run TestRecoveryScenarios -rewrite .
//
// and read every line of the diff against docs/RELIABILITY.md, "The promise": a wrong value
// recorded by -rewrite is worse than no test. Whatever the file says, a read that returns bytes
// that are none of the values ever put for the key fails the test (printed as LIE).
//
// Commands (keys may be ranges: k0..k99; sizes take K and M suffixes):
//
//	open [fsync] [direct] [direct-reads] [verify] [checksum] [skiplist] [fifo]
//	     [segment-size=N] [write-buffer=N] [max-size=N] [inflight=N]
//	                         New; "ok" or the error class
//	close                    Close; "ok" or the error class
//	crash                    the process dies: the open batch is dropped, the active segment
//	                         left unsealed, no bloom.dat saved (batches already cut are written)
//	put key=K (value=S | size=N)
//	                         Put; value S, or a value derived from key, version and size. Every
//	                         put of a key is a new version, named v1, v2... by get
//	delete key=K             Delete
//	drain | flush            Drain ("ok"); Flush ("ok" or the error it reports)
//	cut                      writes the open batch now, as the flush timer would (no seal of a
//	                         segment with a failed batch, no tombstones), and waits for it
//	get [K...]               Get of each key (default: every key the script touched), as v<n>,
//	                         "literal", miss, or error: <class>; runs of keys that read alike
//	                         are printed as one range
//	stats [FIELD...]         the open cache's segments, blobs, torn-tails, corrupt (records),
//	                         evictions, flush-errors and orphans, or the fields named
//	ls                       the directory's files and sizes; a segment as sealed (footer
//	                         entries) or unsealed (whole records from the start)
//	flip <where> [mask=0xNN] XOR a byte on disk (mask default 0x01)
//	truncate <where> | truncate (seg=N | file=F) size=N
//	                         cut a file at a byte
//	  where:  (seg=N | file=F) byte=B [header | footer | trailer | record=K [nth=I]]
//	          B counts from the start of the part named: the segment header, the footer entries,
//	          the footer trailer, or the I-th record of key K in the segment (default the first)
//	fault op=OP|(OP, ...) [name=GLOB] [action=fail|short|tear|flip|ignore] [err=eio|enospc]
//	      [off=N|next+N] [len=N] [skip=N] [times=N] [keep=N] [mask=0xNN]
//	                         add an errorfs fault; off=next+N is N bytes into the next batch of
//	                         the active segment (OP: open create read write sync truncate
//	                         allocate punch stat close remove rename mkdir readdir syncdir lock)
//	faults | clear-faults    list the faults with what they injected (clear-faults drops them)
//	snapshot | diff          remember every file's bytes; list the files added, removed or
//	                         changed since
func TestRecoveryScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/recovery", func(t *testing.T, path string) {
		s := &scenario{
			dir:   t.TempDir(),
			fs:    errorfs.New(vfs.Default, 1),
			vals:  map[string][]putVal{},
			known: map[string]bool{},
		}
		t.Cleanup(func() {
			if s.c != nil {
				s.c.Close()
			}
		})
		datadriven.RunTest(t, path, s.run)
	})
}

// putVal is a value put for a key, and how get names it.
type putVal struct {
	label string
	b     []byte
}

type scenarioFault struct {
	desc string
	f    *errorfs.Fault
}

type scenario struct {
	dir    string
	fs     *errorfs.FS
	c      *Cache
	vals   map[string][]putVal // every value put for a key, oldest first
	known  map[string]bool     // every key put or deleted
	faults []scenarioFault
	snap   map[string][]byte // the files at the last snapshot
}

func (s *scenario) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "open":
		return s.open(t, td)
	case "close":
		c := s.cache(t, td)
		s.c = nil
		return errOrOK(c.Close())
	case "crash":
		s.cache(t, td).crash()
		s.c = nil
		return "ok"
	case "put":
		return s.put(t, td)
	case "delete":
		c := s.cache(t, td)
		var out []string
		for _, k := range s.keysArg(t, td, "key") {
			s.known[k] = true
			if err := c.Delete([]byte(k)); err != nil {
				out = append(out, fmt.Sprintf("%s: %s", k, errClass(err)))
			}
		}
		return linesOrOK(out)
	case "drain":
		s.cache(t, td).Drain()
		return "ok"
	case "flush":
		return errOrOK(s.cache(t, td).Flush())
	case "cut":
		w := s.cache(t, td).w
		w.mu.Lock()
		err := w.cutAll()
		seq := w.nextSeq
		w.mu.Unlock()
		w.waitCommitted(seq)
		return errOrOK(err)
	case "get":
		return s.get(t, td)
	case "stats":
		var fields []string
		for _, a := range td.CmdArgs {
			fields = append(fields, a.Key)
		}
		return statsLine(t, td, s.cache(t, td).Stats(), fields...)
	case "ls":
		return s.ls(t)
	case "snapshot":
		s.snap = s.files(t)
		return "ok"
	case "diff":
		return s.diff(t)
	case "flip":
		return s.flip(t, td)
	case "truncate":
		return s.truncate(t, td)
	case "fault":
		return s.fault(t, td)
	case "faults", "clear-faults":
		var out []string
		for i, f := range s.faults {
			out = append(out, fmt.Sprintf("%d: %s: injected %d", i+1, f.desc, f.f.Injected()))
		}
		if td.Cmd == "clear-faults" {
			s.fs.Clear()
			s.faults = nil
		}
		if len(out) == 0 {
			return "no faults"
		}
		return strings.Join(out, "\n")
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

func (s *scenario) cache(t *testing.T, td *datadriven.TestData) *Cache {
	if s.c == nil {
		td.Fatalf(t, "%s: no cache is open", td.Cmd)
	}
	return s.c
}

func (s *scenario) open(t *testing.T, td *datadriven.TestData) string {
	if s.c != nil {
		td.Fatalf(t, "open: the cache is open already")
	}
	opts := small(withFS(s.fs), WithFlushInterval(time.Hour))
	for _, a := range td.CmdArgs {
		val := func() int64 {
			if len(a.Vals) != 1 {
				td.Fatalf(t, "open: %s needs one value", a.Key)
			}
			return parseSize(t, td, a.Vals[0])
		}
		switch a.Key {
		case "fsync":
			opts = append(opts, WithFsync(true))
		case "direct":
			opts = append(opts, WithBufferedWrites(false))
		case "direct-reads":
			opts = append(opts, WithDirectIOReads(true))
		case "verify":
			opts = append(opts, WithVerifyOnRead(true))
		case "checksum":
			opts = append(opts, WithChecksum(true))
		case "skiplist":
			opts = append(opts, WithIndex(IndexSkipList))
		case "fifo":
			opts = append(opts, WithPolicy(PolicyFIFO))
		case "segment-size":
			opts = append(opts, WithSegmentSize(val()))
		case "write-buffer":
			opts = append(opts, WithWriteBufferSize(val()))
		case "max-size":
			opts = append(opts, WithMaxSize(val()))
		case "inflight":
			opts = append(opts, WithMaxInflightBatches(int(val())))
		default:
			td.Fatalf(t, "open: unknown option %q", a.Key)
		}
	}
	c, err := New(s.dir, opts...)
	if err != nil {
		return errClass(err)
	}
	s.c = c
	return "ok"
}

func (s *scenario) put(t *testing.T, td *datadriven.TestData) string {
	c := s.cache(t, td)
	var lit string
	var size int64
	hasLit := td.MaybeScanArgs(t, "value", &lit)
	if td.HasArg("size") {
		var sz string
		td.ScanArgs(t, "size", &sz)
		size = parseSize(t, td, sz)
	}
	if hasLit == td.HasArg("size") {
		td.Fatalf(t, "put: give value= or size=")
	}
	var out []string
	for _, k := range s.keysArg(t, td, "key") {
		s.known[k] = true
		v := putVal{label: strconv.Quote(lit), b: []byte(lit)}
		if !hasLit {
			ver := len(s.vals[k]) + 1
			v = putVal{label: fmt.Sprintf("v%d", ver), b: value(k, ver, int(size))}
		}
		s.vals[k] = append(s.vals[k], v)
		if err := c.Put([]byte(k), v.b); err != nil {
			out = append(out, fmt.Sprintf("%s: %s", k, errClass(err)))
		}
	}
	return linesOrOK(out)
}

// get reads keys and prints what each gave. A hit whose bytes are none of the values put for the
// key fails the test, whatever the expected output says.
func (s *scenario) get(t *testing.T, td *datadriven.TestData) string {
	c := s.cache(t, td)
	var keys []string
	for _, a := range td.CmdArgs {
		if len(a.Vals) != 0 {
			td.Fatalf(t, "get: keys are given bare (get a b k0..k9)")
		}
		keys = append(keys, expandKeys(t, td, a.Key)...)
	}
	if len(keys) == 0 {
		for k := range s.known {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compareKeys)
	type result struct{ key, out string }
	var res []result
	for _, k := range keys {
		res = append(res, result{k, s.read(t, c, k)})
	}
	// Runs of consecutive keys (k3, k4, k5) that read alike print as one range.
	var lines []string
	for i := 0; i < len(res); {
		j := i + 1
		for j < len(res) && res[j].out == res[i].out && consecutive(res[j-1].key, res[j].key) {
			j++
		}
		name := res[i].key
		if j-i > 1 {
			name += ".." + res[j-1].key
		}
		lines = append(lines, fmt.Sprintf("%s: %s", name, res[i].out))
		i = j
	}
	return strings.Join(lines, "\n")
}

func (s *scenario) read(t *testing.T, c *Cache, k string) string {
	r, ok := c.Get([]byte(k))
	if !ok {
		return "miss"
	}
	got, err := io.ReadAll(r)
	if err != nil {
		return errClass(err)
	}
	for _, v := range slices.Backward(s.vals[k]) {
		if bytes.Equal(got, v.b) {
			p := make([]byte, len(got))
			if n, err := c.ReadAt([]byte(k), p, 0); err == nil && (n != len(p) || !bytes.Equal(p, got)) {
				t.Errorf("ReadAt(%q): %d bytes that differ from what Get returned", k, n)
				return "LIE (ReadAt differs from Get)"
			}
			return v.label
		}
	}
	t.Errorf("Get(%q): %d bytes that are none of the %d values put for the key", k, len(got), len(s.vals[k]))
	return fmt.Sprintf("LIE (%d bytes, none of the values put)", len(got))
}

// settle waits for the seals of the open cache, which run on goroutines of their own (a Drain
// does not wait for them), so that what is on disk no longer depends on timing.
func (s *scenario) settle() {
	if s.c != nil {
		s.c.segs.sealers.Wait()
	}
}

// ls lists the directory's files (LOCK aside) with their sizes. A segment is shown as sealed
// with its footer's entry count, or as unsealed with the count of whole record headers from its
// start.
func (s *scenario) ls(t *testing.T) string {
	s.settle()
	var lines []string
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockFile {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		line := fmt.Sprintf("%s %d", rel, len(b))
		if _, ok := segment.ParseFileName(d.Name()); ok {
			if n, _, sealed := trailerOf(b); sealed {
				line += fmt.Sprintf(" sealed entries=%d", n)
			} else {
				line += fmt.Sprintf(" unsealed records=%d", len(recordsOf(b, int64(len(b)))))
			}
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// files returns the content of every file in the directory (LOCK aside), by relative path.
func (s *scenario) files(t *testing.T) map[string][]byte {
	s.settle()
	files := map[string][]byte{}
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockFile {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(s.dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// diff lists the files added, removed or changed since the last snapshot.
func (s *scenario) diff(t *testing.T) string {
	now := s.files(t)
	var lines []string
	for rel, b := range now {
		if old, ok := s.snap[rel]; !ok {
			lines = append(lines, "added "+rel)
		} else if !bytes.Equal(old, b) {
			lines = append(lines, "changed "+rel)
		}
	}
	for rel := range s.snap {
		if _, ok := now[rel]; !ok {
			lines = append(lines, "removed "+rel)
		}
	}
	if len(lines) == 0 {
		return "no change"
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// trailerOf decodes the footer trailer at the end of a segment file's bytes.
func trailerOf(b []byte) (count uint32, dataEnd int64, ok bool) {
	if len(b) < segment.HeaderSize+segment.TrailerSize {
		return 0, 0, false
	}
	n, end, _, err := segment.DecodeTrailer(b[len(b)-segment.TrailerSize:])
	return n, int64(end), err == nil
}

type recordAt struct {
	off int64
	key string
	len int64
}

// recordsOf returns the records of a segment file's bytes from its header to end, up to the
// first header that does not decode.
func recordsOf(b []byte, end int64) []recordAt {
	var recs []recordAt
	for off := int64(segment.HeaderSize); off < end; {
		h, k, err := record.Decode(b[off:end])
		if err != nil {
			break
		}
		recs = append(recs, recordAt{off: off, key: string(k), len: h.Len()})
		off += h.Len()
	}
	return recs
}

// locate resolves (seg=N | file=F) byte=B [header | footer | trailer | record=K [nth=I]] to a file
// relative to the directory, an absolute offset in it, and words for the output.
func (s *scenario) locate(t *testing.T, td *datadriven.TestData) (rel string, off int64, desc string) {
	s.settle()
	switch {
	case td.HasArg("seg"):
		var id uint32
		td.ScanArgs(t, "seg", &id)
		rel = filepath.Join(segDir, segment.FileName(id))
	case td.HasArg("file"):
		td.ScanArgs(t, "file", &rel)
	default:
		td.Fatalf(t, "%s: give seg= or file=", td.Cmd)
	}
	var at int64
	td.ScanArgs(t, "byte", &at)
	b, err := os.ReadFile(filepath.Join(s.dir, rel))
	if err != nil {
		td.Fatalf(t, "%s: %v", td.Cmd, err)
	}
	switch {
	case td.HasArg("header"):
		return rel, at, fmt.Sprintf("segment header + %d", at)
	case td.HasArg("footer"), td.HasArg("trailer"):
		n, dataEnd, ok := trailerOf(b)
		if !ok {
			td.Fatalf(t, "%s: %s has no footer", td.Cmd, rel)
		}
		if td.HasArg("trailer") {
			return rel, int64(len(b)) - segment.TrailerSize + at, fmt.Sprintf("footer trailer + %d", at)
		}
		if at >= int64(n)*segment.EntrySize {
			td.Fatalf(t, "%s: byte %d is past the %d footer entries", td.Cmd, at, n)
		}
		return rel, dataEnd + at, fmt.Sprintf("footer entries + %d", at)
	case td.HasArg("record"):
		var key string
		nth := 1
		td.ScanArgs(t, "record", &key)
		td.MaybeScanArgs(t, "nth", &nth)
		end := int64(len(b))
		if _, dataEnd, ok := trailerOf(b); ok {
			end = dataEnd
		}
		seen := 0
		for i, r := range recordsOf(b, end) {
			if r.key == key {
				if seen++; seen == nth {
					return rel, r.off + at, fmt.Sprintf("record %d %q + %d", i+1, key, at)
				}
			}
		}
		td.Fatalf(t, "%s: record %d of %q not found in %s", td.Cmd, nth, key, rel)
	}
	return rel, at, ""
}

func (s *scenario) flip(t *testing.T, td *datadriven.TestData) string {
	rel, off, desc := s.locate(t, td)
	mask := byte(1)
	if td.HasArg("mask") {
		mask = parseMask(t, td)
	}
	p := filepath.Join(s.dir, rel)
	b, err := os.ReadFile(p)
	if err != nil || off < 0 || off >= int64(len(b)) {
		td.Fatalf(t, "flip: %s byte %d: %v (%d bytes)", rel, off, err, len(b))
	}
	b[off] ^= mask
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if desc != "" {
		desc = " (" + desc + ")"
	}
	return fmt.Sprintf("%s: byte %d%s ^= %#02x", rel, off, desc, mask)
}

func (s *scenario) truncate(t *testing.T, td *datadriven.TestData) string {
	s.settle()
	var rel, desc string
	var size int64
	if td.HasArg("size") {
		var sz string
		td.ScanArgs(t, "size", &sz)
		size = parseSize(t, td, sz)
		if td.HasArg("seg") {
			var id uint32
			td.ScanArgs(t, "seg", &id)
			rel = filepath.Join(segDir, segment.FileName(id))
		} else {
			td.ScanArgs(t, "file", &rel)
		}
	} else {
		rel, size, desc = s.locate(t, td)
		if desc != "" {
			desc = " (" + desc + ")"
		}
	}
	if err := os.Truncate(filepath.Join(s.dir, rel), size); err != nil {
		td.Fatalf(t, "truncate: %v", err)
	}
	return fmt.Sprintf("%s: cut to %d bytes%s", rel, size, desc)
}

var faultOps = map[string]errorfs.Op{
	"open": errorfs.OpOpen, "create": errorfs.OpCreate, "read": errorfs.OpRead,
	"write": errorfs.OpWrite, "sync": errorfs.OpSync, "truncate": errorfs.OpTruncate,
	"allocate": errorfs.OpAllocate, "punch": errorfs.OpPunchHole, "stat": errorfs.OpStat,
	"close": errorfs.OpClose, "remove": errorfs.OpRemove, "rename": errorfs.OpRename,
	"mkdir": errorfs.OpMkdir, "readdir": errorfs.OpReadDir, "syncdir": errorfs.OpSyncDir,
	"lock": errorfs.OpLock,
}

var faultActions = map[string]errorfs.Action{
	"fail": errorfs.Fail, "short": errorfs.Short, "tear": errorfs.Tear, "flip": errorfs.Flip, "ignore": errorfs.Ignore,
}

func (s *scenario) fault(t *testing.T, td *datadriven.TestData) string {
	f := &errorfs.Fault{}
	var desc []string
	for _, a := range td.CmdArgs {
		desc = append(desc, a.String())
		one := func() string {
			if len(a.Vals) != 1 {
				td.Fatalf(t, "fault: %s needs one value", a.Key)
			}
			return a.Vals[0]
		}
		num := func() int64 { return parseSize(t, td, one()) }
		switch a.Key {
		case "op":
			for _, v := range a.Vals {
				op, ok := faultOps[v]
				if !ok {
					td.Fatalf(t, "fault: unknown op %q", v)
				}
				f.Ops |= op
			}
		case "name":
			f.Name = one()
		case "action":
			act, ok := faultActions[one()]
			if !ok {
				td.Fatalf(t, "fault: unknown action %q", one())
			}
			f.Action = act
		case "err":
			switch one() {
			case "eio":
				f.Err = syscall.EIO
			case "enospc":
				f.Err = syscall.ENOSPC
			default:
				td.Fatalf(t, "fault: unknown err %q", one())
			}
		case "off":
			if rest, ok := strings.CutPrefix(one(), "next+"); ok {
				n := parseSize(t, td, rest)
				w := s.cache(t, td).w
				w.mu.Lock()
				base := int64(segment.HeaderSize) // the next batch starts a new segment
				if a := w.c.segs.active[mainRegion]; a != nil && a != w.c.segs.poisoned[mainRegion] {
					base = a.active.End()
				}
				w.mu.Unlock()
				f.Off = base + n
			} else {
				f.Off = num()
			}
		case "len":
			f.Len = num()
		case "skip":
			f.Skip = int(num())
		case "times":
			f.Times = int(num())
		case "keep":
			f.Keep = int(num())
		case "mask":
			f.Mask = parseMask(t, td)
		default:
			td.Fatalf(t, "fault: unknown argument %q", a.Key)
		}
	}
	if f.Ops == 0 {
		td.Fatalf(t, "fault: give op=")
	}
	s.fs.Add(f)
	s.faults = append(s.faults, scenarioFault{desc: strings.Join(desc, " "), f: f})
	if f.Action == errorfs.Tear {
		return fmt.Sprintf("ok (tears at byte %d)", f.Off)
	}
	return "ok"
}

// keysArg returns the keys of argument name (a key or a range k0..k9).
func (s *scenario) keysArg(t *testing.T, td *datadriven.TestData, name string) []string {
	var k string
	td.ScanArgs(t, name, &k)
	return expandKeys(t, td, k)
}

// expandKeys expands a range k0..k9 (one prefix, numbers from..to) or returns the key itself.
func expandKeys(t *testing.T, td *datadriven.TestData, k string) []string {
	from, to, ok := strings.Cut(k, "..")
	if !ok {
		return []string{k}
	}
	p1, a := splitKey(from)
	p2, b := splitKey(to)
	if p1 != p2 || a < 0 || b < a {
		td.Fatalf(t, "bad key range %q", k)
	}
	var keys []string
	for i := a; i <= b; i++ {
		keys = append(keys, fmt.Sprintf("%s%d", p1, i))
	}
	return keys
}

// splitKey splits k into its prefix and trailing number (-1 if none).
func splitKey(k string) (string, int) {
	i := len(k)
	for i > 0 && k[i-1] >= '0' && k[i-1] <= '9' {
		i--
	}
	if i == len(k) {
		return k, -1
	}
	n, err := strconv.Atoi(k[i:])
	if err != nil {
		return k, -1
	}
	return k[:i], n
}

// compareKeys orders keys by prefix, then number: k2 before k10.
func compareKeys(a, b string) int {
	pa, na := splitKey(a)
	pb, nb := splitKey(b)
	if c := strings.Compare(pa, pb); c != 0 {
		return c
	}
	if na != nb {
		return na - nb
	}
	return strings.Compare(a, b)
}

func consecutive(a, b string) bool {
	pa, na := splitKey(a)
	pb, nb := splitKey(b)
	return pa == pb && na >= 0 && nb == na+1
}

func parseSize(t *testing.T, td *datadriven.TestData, v string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult, v = 1<<10, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, strings.TrimSuffix(v, "M")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		td.Fatalf(t, "%s: bad number %q", td.Cmd, v)
	}
	return n * mult
}

func parseMask(t *testing.T, td *datadriven.TestData) byte {
	var v string
	td.ScanArgs(t, "mask", &v)
	m, err := strconv.ParseUint(v, 0, 8)
	if err != nil || m == 0 {
		td.Fatalf(t, "%s: bad mask %q", td.Cmd, v)
	}
	return byte(m)
}

// statsLine prints the counters that recovery scenarios look at (those named, or all of them);
// none depends on timing.
func statsLine(t *testing.T, td *datadriven.TestData, st Stats, fields ...string) string {
	all := []struct {
		name string
		v    uint64
	}{
		{"segments", uint64(st.Segments)}, {"blobs", uint64(st.Blobs)}, {"torn-tails", st.TornTails},
		{"corrupt", st.CorruptRecord}, {"evictions", st.Evictions}, {"flush-errors", st.FlushErrors},
		{"orphans", st.Orphans},
	}
	var out []string
	for _, f := range all {
		if len(fields) == 0 || slices.Contains(fields, f.name) {
			out = append(out, fmt.Sprintf("%s=%d", f.name, f.v))
		}
	}
	if len(fields) > 0 && len(out) != len(fields) {
		td.Fatalf(t, "stats: unknown field among %v", fields)
	}
	return strings.Join(out, " ")
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return errClass(err)
}

func linesOrOK(lines []string) string {
	if len(lines) == 0 {
		return "ok"
	}
	return strings.Join(lines, "\n")
}

// errClass names an error by the sentinels and errno it wraps: stable across runs, unlike its
// message (which holds paths, offsets and checksums of timestamps).
func errClass(err error) string {
	var names []string
	for _, s := range []struct {
		err  error
		name string
	}{
		{ErrWriteFailed, "write failed"}, {ErrChecksumMismatch, "checksum mismatch"}, {ErrCorrupt, "corrupt"},
		{ErrClosed, "closed"}, {ErrNotFound, "not found"}, {ErrNotBlobCache, "not a blobcache"},
		{ErrLocked, "locked"}, {ErrInvalidOptions, "invalid options"}, {ErrOutrun, "outrun"},
	} {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EIO:
			names = append(names, "EIO")
		case syscall.ENOSPC:
			names = append(names, "ENOSPC")
		default:
			names = append(names, fmt.Sprintf("errno %d", int(errno)))
		}
	}
	if len(names) == 0 {
		return "error: " + err.Error()
	}
	return "error: " + strings.Join(names, ", ")
}
