package server

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestTwemproxySpread sets the keys of several key families through nutcracker in front of three
// instances and counts, from each instance's Stats, where they went. With the recommended
// configuration every instance must get between 0.9 and 1.1 of a third of every family; the
// configuration docs/SERVER.md recommended before must be caught outside that band (by a family
// whose keys differ only in their last bytes, and by the ring of its server names), or the check
// would not catch what it was written for.
//
// The keys are fixed and nutcracker's hashing is deterministic, so the counts are the same on
// every run. `go test ./server/ -run TwemproxySpread -v -twemproxy.keys 30000` prints the table
// docs/SERVER.md shows.

var spreadKeys = flag.Int("twemproxy.keys", 10000, "keys per family that TestTwemproxySpread sets through nutcracker")

// keyFamily is a way applications name their keys.
type keyFamily struct {
	name string
	key  func(i int) string
}

// longKeyPrefix is the 190 bytes that the keys of the long-key family share.
var longKeyPrefix = func() string {
	p := "tenant-0042/archive/2024/06/01/"
	for len(p) < 190 {
		p += "a-long-shared-path/"
	}
	return p[:190]
}()

// tailAlphabet is the 64 key bytes the last-bytes family varies.
const tailAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"

// splitmix64 scrambles x (a bijection), to make keys that look random but are the same on every
// run.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

var keyFamilies = []keyFamily{
	{"user:%d", func(i int) string { return "user:" + strconv.Itoa(i) }},
	{"img/%08d.jpg", func(i int) string { return fmt.Sprintf("img/%08d.jpg", i) }},
	{"session-<uuid v4>", func(i int) string {
		a, b := splitmix64(uint64(i)), splitmix64(uint64(i)|1<<40)
		a = a&^(0xf<<12) | 4<<12 // version 4
		b = b&^(3<<62) | 2<<62   // RFC 4122 variant
		return fmt.Sprintf("session-%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, b>>48, b&(1<<48-1))
	}},
	{"%d (short numeric)", strconv.Itoa},
	{"200 bytes: 190-byte shared prefix + %010d", func(i int) string { return longKeyPrefix + fmt.Sprintf("%010d", i) }},
	{"render/v3/page-XXX (only the last 3 bytes differ)", func(i int) string {
		return "render/v3/page-" + string([]byte{tailAlphabet[i>>12&63], tailAlphabet[i>>6&63], tailAlphabet[i&63]})
	}},
}

func TestTwemproxySpread(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nutcracker")
	}
	const instances = 3
	var servers []*Server
	var backends []string
	for range instances {
		cfg := testConfig(t)
		cfg.HTTPAddr = ""
		s, _ := start(t, cfg)
		servers = append(servers, s)
		backends = append(backends, s.MemcacheAddr())
	}
	n := *spreadKeys
	for _, tc := range []struct {
		name string
		pool twemproxyPool
		even bool // whether every family must be within 10% of even
	}{
		{"recommended", recommendedPool, true},
		{"former", formerPool, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := tc.pool
			pool.timeoutMS = 60000
			proxy := startTwemproxy(t, pool, backends)
			var uneven []string
			var table strings.Builder
			fmt.Fprintf(&table, "hash %s, names %s, %d keys per family; share of a third per instance:\n", tc.pool.hash, tc.pool.names, n)
			for _, fam := range keyFamilies {
				counts := spreadOf(t, proxy, servers, fam, n)
				worst := 0.0
				fmt.Fprintf(&table, "| %s |", fam.name)
				for _, c := range counts {
					share := float64(c) * instances / float64(n)
					worst = max(worst, share-1, 1-share)
					fmt.Fprintf(&table, " %.3f |", share)
				}
				fmt.Fprintf(&table, " %.1f%% |\n", 100*worst)
				if worst > 0.1 {
					uneven = append(uneven, fmt.Sprintf("%s %v", fam.name, counts))
				}
			}
			t.Log(table.String())
			switch {
			case tc.even && len(uneven) > 0:
				t.Errorf("hash %s, names %s: spread beyond 10%% of even (%d keys each): %s",
					tc.pool.hash, tc.pool.names, n, strings.Join(uneven, "; "))
			case !tc.even && len(uneven) == 0:
				t.Errorf("hash %s, names %s: every family within 10%% of even, so the check does not catch the spread it was written for",
					tc.pool.hash, tc.pool.names)
			}
		})
	}
}

// spreadOf sets n keys of fam through proxy, pipelined on one connection, and returns how many
// each server stored (from the Puts of its cache: nothing else writes to them meanwhile).
func spreadOf(t *testing.T, proxy string, servers []*Server, fam keyFamily, n int) []int {
	t.Helper()
	before := make([]uint64, len(servers))
	for i, s := range servers {
		before[i] = s.Cache().Stats().Puts
	}
	conn, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(conn)
		for i := range n {
			if _, err := fmt.Fprintf(w, "set %s 0 0 1\r\nx\r\n", fam.key(i)); err != nil {
				written <- err
				return
			}
		}
		written <- w.Flush()
	}()
	r := bufio.NewReader(conn)
	var readErr error
	for i := 0; i < n && readErr == nil; i++ {
		line, err := r.ReadString('\n')
		if err == nil && line != "STORED\r\n" {
			err = fmt.Errorf("reply %q", line)
		}
		if err != nil {
			readErr = fmt.Errorf("set %s through the proxy: %w", fam.key(i), err)
		}
	}
	conn.Close() // unblocks the writer if the reader stopped early
	if err := <-written; readErr == nil && err != nil {
		readErr = err
	}
	if readErr != nil {
		t.Fatal(readErr)
	}
	counts := make([]int, len(servers))
	total := 0
	for i, s := range servers {
		counts[i] = int(s.Cache().Stats().Puts - before[i])
		total += counts[i]
	}
	if total != n {
		t.Fatalf("family %s: %d keys set, %d stored (per instance %v)", fam.name, n, total, counts)
	}
	return counts
}
