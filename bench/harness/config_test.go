package harness

import (
	"reflect"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int64
	}{
		{"1M,3M,9M", []int64{1 << 20, 3 << 20, 9 << 20}},
		{"1000, 2k", []int64{1000, 2048}},
		{"1G", []int64{1 << 30}},
	} {
		got, err := ParseSizes(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "1T", "-1", "0"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted it", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := QuickConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.IOKeys = []int64{3, 2}
	if c.Validate() == nil {
		t.Error("descending dataset sizes accepted")
	}
	c = DefaultConfig()
	c.Goroutines = 0
	if c.Validate() == nil {
		t.Error("zero goroutines accepted")
	}
}

func TestMixedDatasetBytes(t *testing.T) {
	c := DefaultConfig()
	// 2048 preloaded and 10% of 40000 operations, 1 MiB each.
	if got, want := c.MixedDatasetBytes(), int64(2048+4000)<<20; got != want {
		t.Errorf("MixedDatasetBytes = %d, want %d", got, want)
	}
	c.MixedPreload, c.MixedOps, c.MixedValue = 0, 0, 1
	if got := c.MixedDatasetBytes(); got != 0 {
		t.Errorf("empty phase: %d", got)
	}
}

func TestConfigValidateShape(t *testing.T) {
	c := DefaultConfig()
	c.BlobcacheRead = "mmap"
	if c.Validate() == nil {
		t.Error("unknown read path accepted")
	}
	c = DefaultConfig()
	c.RocksDBL0Files = -1
	if c.Validate() == nil {
		t.Error("negative L0 file count accepted")
	}
}

// TestExeFor: a child runs from its engine's own binary when one is named, by exact name first,
// then by the longest prefix, else from the driver's.
func TestExeFor(t *testing.T) {
	d := &Driver{Exe: "all", EngineExe: map[string]string{
		"blobcache*": "bc", "blobcache-direct": "direct", "rocks*": "r", "rocksdb*": "rocksdb",
	}}
	for eng, want := range map[string]string{
		"blobcache": "bc", "blobcache-prod": "bc", "blobcache-direct": "direct",
		"rocksdb": "rocksdb", "pebble": "all",
	} {
		if got := d.exeFor(eng); got != want {
			t.Errorf("exeFor(%q) = %q, want %q", eng, got, want)
		}
	}
	if got := (&Driver{Exe: "all"}).exeFor("badger"); got != "all" {
		t.Errorf("no EngineExe: %q", got)
	}
}
