//go:build linux

package netloop

import (
	"testing"
	"time"
)

// TestSweepPeriod: an eighth of the shortest limit set, within [10ms, 1s]; none without limits.
func TestSweepPeriod(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		lim  Limits
		want time.Duration
	}{
		{Limits{}, 0},
		{Limits{Idle: 2 * time.Minute, Write: time.Minute}, time.Second},
		{Limits{Idle: 800 * ms}, 100 * ms},
		{Limits{Write: 800 * ms}, 100 * ms},
		{Limits{Idle: 800 * ms, Write: 400 * ms}, 50 * ms},
		{Limits{Idle: time.Minute, Read: 400 * ms, Write: time.Minute}, 50 * ms},
		{Limits{Idle: 40 * ms}, 10 * ms},
	} {
		if got := sweepPeriod(tc.lim); got != tc.want {
			t.Errorf("sweepPeriod(%+v) = %v, want %v", tc.lim, got, tc.want)
		}
	}
}
