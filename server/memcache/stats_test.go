package memcache

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// readStats sends a stats command and returns its STAT lines as a map and the names in order.
func readStats(t *testing.T, c io.ReadWriter, br *bufio.Reader, cmd string) (map[string]string, []string) {
	t.Helper()
	if _, err := io.WriteString(c, cmd+"\r\n"); err != nil {
		t.Fatal(err)
	}
	stats := map[string]string{}
	var names []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if line == "END\r\n" {
			return stats, names
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "STAT" || !strings.HasSuffix(line, "\r\n") {
			t.Fatalf("%s: bad line %q", cmd, line)
		}
		if _, dup := stats[f[1]]; dup {
			t.Fatalf("%s: %s twice", cmd, f[1])
		}
		stats[f[1]] = f[2]
		names = append(names, f[1])
	}
}

// TestStats checks that stats reports memcached's standard fields with values that follow the
// commands sent, and answers groups and bad arguments as memcached does.
func TestStats(t *testing.T) {
	e := newEnv(t, Config{})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	sent := "set a 0 0 1\r\n1\r\nset b 0 0 2\r\n22\r\nset b 0 0 1\r\n2\r\nget a b c\r\ndelete a\r\ndelete a\r\nmg b v\r\n"
	io.WriteString(c, sent)
	want := "STORED\r\nSTORED\r\nSTORED\r\nVALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n2\r\nEND\r\nDELETED\r\nNOT_FOUND\r\nVA 1\r\n2\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v", got, err)
	}
	e.c.Drain()
	stats, _ := readStats(t, c, br, "stats")
	for name, want := range map[string]string{
		"pid":               strconv.Itoa(os.Getpid()),
		"version":           "test",
		"pointer_size":      strconv.Itoa(strconv.IntSize),
		"curr_connections":  "1",
		"total_connections": "1",
		"cmd_get":           "4",
		"cmd_set":           "3",
		"get_hits":          "3",
		"get_misses":        "1",
		"delete_hits":       "1",
		"delete_misses":     "1",
		"store_too_large":   "0",
		"auth_cmds":         "0",
		"auth_errors":       "0",
		"bytes_read":        strconv.Itoa(len(sent + "stats\r\n")),
		"bytes_written":     strconv.Itoa(len(want)),
		"accepting_conns":   "1",
		"curr_items":        "1",
		"total_items":       "3",
	} {
		if stats[name] != want {
			t.Errorf("%s = %q, want %q", name, stats[name], want)
		}
	}
	for _, name := range []string{"uptime", "time", "rusage_user", "rusage_system", "threads", "idle_kicks", "blobcache_disk_bytes"} {
		if _, ok := stats[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	if now, _ := strconv.ParseInt(stats["time"], 10, 64); now < time.Now().Unix()-5 {
		t.Errorf("time = %s", stats["time"])
	}

	settings, _ := readStats(t, c, br, "stats settings")
	if settings["item_size_max"] != strconv.FormatInt(e.st.MaxValueSize(), 10) || settings["binding_protocol"] != "ascii" {
		t.Errorf("stats settings: %v", settings)
	}
	for _, group := range []string{"items", "slabs", "sizes", "conns"} {
		if s, _ := readStats(t, c, br, "stats "+group); len(s) != 0 {
			t.Errorf("stats %s: %v, want nothing", group, s)
		}
	}
	// memcapable checks that stats takes no noreply.
	io.WriteString(c, "stats noreply\r\nstats bogus\r\n")
	for range 2 {
		if line, err := br.ReadString('\n'); line != "ERROR\r\n" {
			t.Fatalf("got %q, %v", line, err)
		}
	}
}
