package memcache

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/testproc"
	"github.com/seed57392e9e/blobcache/server/store"
)

// The oracle tests send the same command scripts to a real memcached and to a blobcache server
// and compare the replies byte for byte, apart from the differences listed in oracleDiffs.

// oracleDiff is a known difference from memcached. A step is named by its script and the
// first line it sends; an entry without Step covers every step of its script.
type oracleDiff struct {
	Script, Step string
	Reason       string
}

// Reasons shared by several entries of oracleDiffs.
const (
	readsPast   = "memcached does not read past the data block of a set it refuses for its key, flags or exptime, and answers the block as a command; blobcache reads past it and stays in step"
	flags64     = "memcached stores client flags over 32 bits as their low 32 bits without a word; blobcache refuses them"
	hitAccess   = "blobcache does not track reads: mg flags h (hit before) and l (last access) are refused"
	framingLost = "after a data block that does not end in \\r\\n, or a storage command whose data length cannot be read, memcached reads what follows as commands; blobcache closes the connection, as what follows may be data"
)

// oracleDiffs is every difference the oracle scripts show, with its reason. docs/SERVER.md
// ("memcached protocol") keeps the same table. An entry whose step no longer differs fails the
// test: the list can only shrink.
var oracleDiffs = []oracleDiff{
	// memcached 1.6.18 answers a set it refuses for its key, flags or exptime without reading
	// its data block, then takes the block for a command (ERROR). blobcache reads past it.
	{Script: "edge", Step: "set " + strings.Repeat("k", MaxKeyLen+1) + " 0 0 1", Reason: readsPast},
	{Script: "edge", Step: "set kf -1 0 1", Reason: readsPast},
	{Script: "edge", Step: "set kf 0 soon 1", Reason: readsPast},
	{Script: "noreply", Step: "set k x 0 1 noreply", Reason: readsPast},

	// Keys with control bytes: the protocol forbids them, memcached takes them.

	// Client flags over 32 bits: memcached keeps their low 32 bits without a word.
	{Script: "edge", Step: "set kf 4294967296 0 1", Reason: flags64},
	{Script: "edge", Step: "get kf", Reason: flags64},

	// Framing lost: blobcache closes the connection where memcached reads on.
	{Script: "edge", Step: "set kept 0 0 3", Reason: framingLost},
	{Script: "edge", Step: "set kept 0 0 -1", Reason: framingLost},
	{Script: "edge", Step: "set kept 0 0 huge", Reason: framingLost},
	{Script: "edge", Step: "set kept 0 0", Reason: framingLost},
	{Script: "malformed", Step: "set", Reason: framingLost},
	{Script: "malformed", Step: "set k", Reason: framingLost},
	{Script: "malformed", Step: "set k 0 0", Reason: framingLost},
	{Script: "malformed", Step: "set k 0 0 1 noreply extra", Reason: framingLost},
	{Script: "malformed", Step: "ms k", Reason: framingLost},
	{Script: "malformed", Step: "ms k abc", Reason: framingLost},
	{Script: "noreply", Step: "set kb 0 0 1 noreply", Reason: framingLost},

	{Script: "malformed", Step: "me k", Reason: "me dumps memcached's item internals; blobcache shows the expiry, cas and value size it knows, not la, fetch or cls (last access, fetched before, slab class), and its size is the value's, not the slab item's"},
	{Script: "meta_flags", Step: "mg k h", Reason: hitAccess},
	{Script: "meta_flags", Step: "mg k l", Reason: hitAccess},
}

// oracleSentinel is sent after each step: its answer, unique to the step, marks the end of the
// step's replies. Both servers answer a miss with the O flag echoed.
func oracleSentinel(n int) (req, reply string) {
	return fmt.Sprintf("mg oracle-sentinel O%d\r\n", n), fmt.Sprintf("EN O%d\r\n", n)
}

// startMemcached starts /usr/bin/memcached on a free loopback port and returns its address and
// version. Without memcached the test fails under CI and is skipped elsewhere.
func startMemcached(t *testing.T) (addr, version string) {
	t.Helper()
	bin, err := exec.LookPath("memcached")
	if err != nil {
		bin, err = exec.LookPath("/usr/bin/memcached")
	}
	if err != nil {
		msg := "memcached is not installed: the oracle tests need it (Debian: apt-get install -y memcached; .ci/run installs it)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var stderr bytes.Buffer
	addr = testproc.Start(t, "memcached", func(port int) *exec.Cmd {
		// -U 0: no UDP. -I 1m (the default) and -m 64 are what the scripts expect; -c leaves
		// room for their connections.
		args := []string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "0", "-m", "64", "-I", "1m", "-c", "256", "-t", "2"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root") // memcached refuses to run as root without -u
		}
		cmd := exec.Command(bin, args...)
		stderr.Reset()
		cmd.Stderr = &stderr
		return cmd
	}, stderr.String)
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "version\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r\n"), "VERSION ")
	if err != nil || !ok {
		t.Fatalf("memcached version: %q, %v", line, err)
	}
	return addr, v
}

// oracle is a memcached and a blobcache server side by side.
type oracle struct {
	t      *testing.T
	mc, bc string // addresses
}

// newOracle starts both servers. blobcache reports memcached's version, takes memcached's
// default item size limit (-I 1m) and uses the real clock, as memcached does.
func newOracle(t *testing.T) *oracle {
	mc, version := startMemcached(t)
	e := newEnvStore(t, Config{Version: version, MaxConns: 256}, store.Config{MaxValueSize: 1 << 20, Now: time.Now})
	return &oracle{t: t, mc: mc, bc: e.addr}
}

// side is one server's connection, and what a script has seen of it.
type side struct {
	addr   string
	c      net.Conn
	br     *bufio.Reader
	closed bool
	cas    map[string]string // cas value -> its label, in order of first appearance
}

func (s *side) connect(t *testing.T) {
	if s.c != nil {
		s.c.Close()
	}
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	s.c, s.br, s.closed = c, bufio.NewReader(c), false
}

// exchange sends req, then the step's sentinel (or, with eof, closes its writing half), and
// returns what came back before the sentinel's answer, with "<closed>" when the server closed
// the connection and "<no answer>" when it said nothing more for a while.
func (s *side) exchange(req []byte, n int, eof bool) string {
	if s.closed {
		return "<closed>"
	}
	sentinel, end := oracleSentinel(n)
	s.c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := append(append([]byte(nil), req...), sentinel...)
	if eof {
		msg = req
	}
	if _, err := s.c.Write(msg); err != nil {
		s.closed = true
		return "<closed>"
	}
	if eof {
		s.c.(*net.TCPConn).CloseWrite()
	}
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		if !eof && bytes.HasSuffix(got, []byte(end)) {
			return string(got[:len(got)-len(end)])
		}
		k, err := s.br.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return string(got) + "<no answer>"
			}
			s.closed = true
			return string(got) + "<closed>"
		}
	}
}

// normalize replaces the cas values in a reply (gets' fifth VALUE field, the c flag of meta
// replies) by labels in order of first appearance on this server: #1, #2, ... The two servers
// pick different numbers, but a script that writes distinct values sees the same pattern of
// equal and unequal cas values from both. Data blocks are copied untouched.
func (s *side) normalize(reply string) string {
	var out strings.Builder
	for len(reply) > 0 {
		i := strings.Index(reply, "\r\n")
		if i < 0 {
			out.WriteString(reply)
			break
		}
		line := reply[:i]
		reply = reply[i+2:]
		f := strings.Split(line, " ")
		size := -1
		switch {
		case f[0] == "VALUE" && len(f) >= 4:
			size, _ = strconv.Atoi(f[3])
			if len(f) == 5 {
				f[4] = s.label(f[4])
			}
		case f[0] == "VA" && len(f) >= 2:
			size, _ = strconv.Atoi(f[1])
			fallthrough
		case f[0] == "HD" || f[0] == "EN" || f[0] == "NF" || f[0] == "NS" || f[0] == "EX":
			for j := 1; j < len(f); j++ {
				if len(f[j]) > 1 && f[j][0] == 'c' {
					f[j] = "c" + s.label(f[j][1:])
				}
			}
		}
		var data string
		if size >= 0 && size+2 <= len(reply) {
			data, reply = reply[:size+2], reply[size+2:]
			if v := unpad(data[:size]); len(v) < size {
				// A number an incr or decr left padded with spaces, alone or with what appends
				// and prepends added around it since: memcached pads it only when nothing else
				// holds the item at that moment (an answer still being sent, its LRU threads),
				// so the padding is not deterministic. Both servers' values are compared with
				// the spaces after every digit taken out.
				data = v + "\r\n"
				if f[0] == "VALUE" {
					f[3] = strconv.Itoa(len(v))
				} else {
					f[1] = strconv.Itoa(len(v))
				}
			}
		}
		out.WriteString(strings.Join(f, " ") + "\r\n")
		out.WriteString(data)
	}
	return out.String()
}

// unpad returns b without the spaces that follow a digit.
func unpad(b string) string {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] == ' ' && i > 0 && (b[i-1] >= '0' && b[i-1] <= '9' || len(out) > 0 && out[len(out)-1] >= '0' && out[len(out)-1] <= '9' && b[i-1] == ' ') {
			continue
		}
		out = append(out, b[i])
	}
	return string(out)
}

func (s *side) label(cas string) string {
	if s.cas == nil {
		s.cas = map[string]string{}
	}
	l, ok := s.cas[cas]
	if !ok {
		l = fmt.Sprintf("#%d", len(s.cas)+1)
		s.cas[cas] = l
	}
	return l
}

// oracleStep is a group of request lines sent in one write.
type oracleStep struct {
	line int    // in the script
	req  []byte // what is sent
	eof  bool   // the client closes its writing half after the request, then reconnects
}

// name is the first line a step sends, which oracleDiffs uses to name it.
func (s oracleStep) name() string {
	name, _, _ := strings.Cut(string(s.req), "\n")
	return strings.TrimSuffix(name, "\r")
}

// parseOracleScript reads a script of testdata/oracle:
//
//	# comment
//	> text       send text and "\r\n" (Go string escapes); consecutive lines are one step,
//	             sent in one write
//	>| text      send text without a line ending, as part of the step
//	>* N text    send text N times, without a line ending, as part of the step
//	! eof        end the step by closing the writing half; read until the server closes,
//	             then reconnect
//	! reconnect  open new connections
//
// A blank line, a comment or a directive ends a step.
func parseOracleScript(t *testing.T, file string) []oracleStep {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var steps []oracleStep
	var cur *oracleStep
	end := func() {
		if cur != nil {
			steps = append(steps, *cur)
			cur = nil
		}
	}
	for i, l := range strings.Split(string(b), "\n") {
		n := i + 1
		l = strings.TrimRight(l, "\r")
		var text string
		switch {
		case strings.HasPrefix(l, ">| "):
			text = unquote(t, n, l[3:])
		case strings.HasPrefix(l, ">* "):
			count, rep, _ := strings.Cut(l[3:], " ")
			k, err := strconv.Atoi(count)
			if err != nil {
				t.Fatalf("%s:%d: bad count in %q", file, n, l)
			}
			text = strings.Repeat(unquote(t, n, rep), k)
		case strings.HasPrefix(l, "> ") || l == ">":
			text = unquote(t, n, strings.TrimPrefix(l[1:], " ")) + "\r\n"
		case l == "! eof":
			if cur == nil {
				t.Fatalf("%s:%d: ! eof ends no step", file, n)
			}
			cur.eof = true
			end()
			continue
		case l == "! reconnect":
			end()
			steps = append(steps, oracleStep{line: n})
			continue
		case l == "" || strings.HasPrefix(l, "#"):
			end()
			continue
		default:
			t.Fatalf("%s:%d: cannot parse %q", file, n, l)
		}
		if cur == nil {
			cur = &oracleStep{line: n}
		}
		cur.req = append(cur.req, text...)
	}
	end()
	return steps
}

// run plays steps on both servers and returns, for each step that sends something, both
// replies normalised.
func (o *oracle) run(steps []oracleStep, each func(st oracleStep, mc, bc string)) {
	mc, bc := &side{addr: o.mc}, &side{addr: o.bc}
	mc.connect(o.t)
	bc.connect(o.t)
	defer func() { mc.c.Close(); bc.c.Close() }()
	for n, st := range steps {
		if st.req == nil {
			mc.connect(o.t)
			bc.connect(o.t)
			continue
		}
		each(st, mc.normalize(mc.exchange(st.req, n, st.eof)), bc.normalize(bc.exchange(st.req, n, st.eof)))
		if st.eof {
			mc.connect(o.t)
			bc.connect(o.t)
		}
	}
}

// TestOracleScripts runs each script of testdata/oracle against a new memcached and a new
// blobcache server.
func TestOracleScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/oracle/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	used := make([]bool, len(oracleDiffs))
	ran := map[string]bool{}
	for _, file := range files {
		script := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(script, func(t *testing.T) {
			o := newOracle(t) // fresh servers: no script sees another's keys
			ran[script] = true
			steps := parseOracleScript(t, file)
			for _, d := range oracleDiffs {
				n := 0
				for _, st := range steps {
					if d.Script == script && d.Step != "" && st.req != nil && st.name() == d.Step {
						n++
					}
				}
				if n > 1 {
					t.Errorf("oracleDiffs: step %q names %d steps of %s: make its first line unique", d.Step, n, file)
				}
			}
			o.run(steps, func(st oracleStep, mc, bc string) {
				allowed := -1
				for i, d := range oracleDiffs {
					if d.Script == script && (d.Step == "" || d.Step == st.name()) {
						allowed = i
					}
				}
				switch {
				case mc != bc && allowed < 0:
					t.Errorf("%s:%d: %.200q\n%s", file, st.line, st.req, replyDiff(mc, bc))
				case mc != bc:
					used[allowed] = true
					t.Logf("%s:%d: known difference (%s)\n  memcached: %.300q\n  blobcache: %.300q", file, st.line, oracleDiffs[allowed].Reason, mc, bc)
				}
			})
		})
	}
	for i, d := range oracleDiffs {
		if ran[d.Script] && !used[i] {
			t.Errorf("oracleDiffs: script %q, step %q no longer differs from memcached: remove the entry (and its row in docs/SERVER.md)", d.Script, d.Step)
		}
	}
}

// TestOracleRandom sends seeded random sequences of the commands blobcache supports, pipelined
// in random batches, to both servers; every batch must be answered the same. Set
// BLOBCACHE_ORACLE_SEED to replay a failure.
func TestOracleRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BLOBCACHE_ORACLE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (BLOBCACHE_ORACLE_SEED=%d replays it)", seed, seed)
	o := newOracle(t)
	g := &oracleGen{r: rand.New(rand.NewPCG(seed, 2))}
	g.keys = []string{"a", "b", "c", "key-with-\xc3\xa9", "\x80\xff", strings.Repeat("L", MaxKeyLen)}
	batches := 1000
	if testing.Short() {
		batches = 200
	}
	var steps []oracleStep
	for i := range batches {
		var req []byte
		for range 1 + g.r.IntN(8) {
			cmd := g.command()
			if len(req) > 0 && (strings.HasPrefix(cmd, "incr ") || strings.HasPrefix(cmd, "decr ") || strings.HasPrefix(cmd, "ma ")) {
				// memcached pads a shorter number in place only when no answer still being
				// sent holds the item (a get of it earlier in the same batch): an incr, decr
				// or ma starts a batch, where both servers pad.
				steps = append(steps, oracleStep{line: i + 1, req: req})
				req = nil
			}
			req = append(req, cmd...)
		}
		steps = append(steps, oracleStep{line: i + 1, req: req})
		if g.r.IntN(40) == 0 {
			steps = append(steps, oracleStep{line: i + 1}) // reconnect
		}
	}
	o.run(steps, func(st oracleStep, mc, bc string) {
		if mc != bc {
			t.Fatalf("seed %d, batch %d: %.2000q\n%s", seed, st.line, st.req, replyDiff(mc, bc))
		}
	})
}

// replyDiff shows two replies, around their first difference when they are long.
func replyDiff(mc, bc string) string {
	i := 0
	for i < len(mc) && i < len(bc) && mc[i] == bc[i] {
		i++
	}
	from := max(0, i-100)
	clip := func(s string) string {
		if len(s) > 600 && from > 0 {
			return fmt.Sprintf("...%q...", s[from:min(len(s), i+300)])
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("  memcached: %s\n  blobcache: %s\n  (first difference at byte %d)", clip(mc), clip(bc), i)
}

// oracleGen makes random commands over a few keys. Every value is new (a counter starts it),
// so cas values are all distinct on both servers; no value holds an "M" (or anything that could
// pass for a sentinel's answer).
type oracleGen struct {
	r      *rand.Rand
	keys   []string
	values int
	// counted are the keys an incr, decr or ma may have left holding a number padded with
	// spaces, which memcached may or may not have padded (see normalize): an append or prepend
	// to one would make the two servers' values differ for good (one numeric, one not), so
	// until a set replaces it, writes to it are sets.
	counted map[string]bool
}

// countedKey marks k as holding a counted number, or, with false, a value of its own.
func (g *oracleGen) countedKey(k string, counted bool) {
	if g.counted == nil {
		g.counted = make(map[string]bool)
	}
	g.counted[k] = counted
}

func (g *oracleGen) key() string { return g.keys[g.r.IntN(len(g.keys))] }

func (g *oracleGen) value() string {
	g.values++
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \r\n\x00\xff"
	b := []byte(strconv.Itoa(g.values) + "-")
	n := g.r.IntN(100)
	if g.r.IntN(10) == 0 {
		n = g.r.IntN(200 << 10)
	}
	for range n {
		b = append(b, alphabet[g.r.IntN(len(alphabet))])
	}
	return string(b)
}

// exptime picks an expiry that both servers see the same way: none, already past (relative or
// absolute), or far enough ahead not to pass during the test.
func (g *oracleGen) exptime() string {
	return []string{"0", "0", "0", "-1", "1600000000", "3600", "2000000000"}[g.r.IntN(7)]
}

func (g *oracleGen) noreply() string {
	if g.r.IntN(4) == 0 {
		return " noreply"
	}
	return ""
}

// metaFlags returns a random subset of flags in random order, each a separate token.
func (g *oracleGen) metaFlags(flags []string) string {
	var out []string
	for _, f := range flags {
		if g.r.IntN(2) == 0 {
			out = append(out, f)
		}
	}
	g.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " ")
}

func (g *oracleGen) command() string {
	switch op := g.r.IntN(32); {
	case op < 6:
		v, k := g.value(), g.key()
		g.countedKey(k, false)
		return fmt.Sprintf("set %s %d %s %d%s\r\n%s\r\n", k, g.r.Uint32()>>uint(g.r.IntN(32)), g.exptime(), len(v), g.noreply(), v)
	case op < 10:
		cmd := []string{"get", "gets"}[g.r.IntN(2)]
		for range 1 + g.r.IntN(4) {
			cmd += " " + g.key()
		}
		return cmd + "\r\n"
	case op < 12:
		tail := []string{"", " 0", " noreply", " 0 noreply"}[g.r.IntN(4)]
		return "delete " + g.key() + tail + "\r\n"
	case op < 15:
		// No s: the size of a number memcached may or may not have padded (see normalize).
		return "mg " + g.key() + g.metaFlags([]string{"v", "f", "k", "c", "q", "Oop" + strconv.Itoa(g.r.IntN(100))}) + "\r\n"
	case op < 17:
		v, k := g.value(), g.key()
		mode := []string{"S", "E", "A", "P", "R"}[g.r.IntN(5)]
		if g.counted[k] && (mode == "A" || mode == "P") {
			mode = "S"
		}
		flags := g.metaFlags([]string{"F" + strconv.Itoa(int(g.r.Uint32()>>16)), "T" + g.exptime(), "q", "k", "Oms", "M" + mode})
		if !strings.Contains(flags, "M") || strings.Contains(flags, "MS") {
			g.countedKey(k, false) // a set (ms's default mode)
		}
		return fmt.Sprintf("ms %s %d%s\r\n%s\r\n", k, len(v), flags, v)
	case op < 18:
		return "md " + g.key() + g.metaFlags([]string{"q", "k", "Omd"}) + "\r\n"
	case op < 19:
		return []string{"mn\r\n", "version\r\n"}[g.r.IntN(2)]
	case op < 20:
		return fmt.Sprintf("verbosity %d%s\r\n", g.r.IntN(2), g.noreply())
	case op < 23:
		// add, replace, append, prepend, and cas with a cas value neither server has handed
		// out (the cas values of the two differ, so a matching one cannot be sent to both).
		v, k := g.value(), g.key()
		cmd := []string{"add", "replace", "append", "prepend", "cas"}[g.r.IntN(5)]
		if g.counted[k] && (cmd == "append" || cmd == "prepend") {
			cmd = "set"
			g.countedKey(k, false)
		}
		casID := ""
		if cmd == "cas" {
			casID = " 18446744073709551615"
		}
		return fmt.Sprintf("%s %s %d %s %d%s%s\r\n%s\r\n", cmd, k, g.r.Uint32()>>uint(g.r.IntN(32)), g.exptime(), len(v), casID, g.noreply(), v)
	case op < 25:
		// A number to count on, distinct from every other value written, and below 2^63 (far
		// enough for the incrs of a run): memcached takes a value from 2^63 up for non-numeric
		// when its strchr for a minus sign, which runs past the item's end, finds one in the
		// memory that follows.
		g.values++
		v := strconv.FormatUint(uint64(g.values)*1_000_003+[]uint64{0, 1 << 62, 1<<63 - 1<<50}[g.r.IntN(3)], 10)
		if g.r.IntN(4) == 0 {
			v += "  "
		}
		k := g.key()
		g.countedKey(k, false) // not counted yet: set as written
		return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v)
	case op < 27:
		d := []string{"1", "0", "7", "18446744073709551615", "1000000000000", "x"}[g.r.IntN(6)]
		k := g.key()
		g.countedKey(k, true)
		return fmt.Sprintf("%s %s %s%s\r\n", []string{"incr", "decr"}[g.r.IntN(2)], k, d, g.noreply())
	case op < 28:
		k := g.key()
		g.countedKey(k, true)
		return "ma " + k + g.metaFlags([]string{"v", "c", "k", "q", "Oma", "N0", "J7", "D3", "MD"}) + "\r\n"
	case op < 30:
		if g.r.IntN(2) == 0 {
			return fmt.Sprintf("touch %s %s%s\r\n", g.key(), g.exptime(), g.noreply())
		}
		cmd := []string{"gat", "gats"}[g.r.IntN(2)] + " " + g.exptime()
		for range 1 + g.r.IntN(3) {
			cmd += " " + g.key()
		}
		return cmd + "\r\n"
	case op < 31:
		return "mg " + g.key() + g.metaFlags([]string{"v", "N0", "q", "Omg"}) + "\r\n"
	default:
		if g.r.IntN(8) == 0 {
			return "flush_all" + []string{"", " 0"}[g.r.IntN(2)] + g.noreply() + "\r\n"
		}
		return "mn\r\n"
	}
}
