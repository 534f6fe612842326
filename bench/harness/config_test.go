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
