package replay

import (
	"math"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// TestComputeHandTrace checks every metric on three jobs on 4 nodes:
//
//	job tenant size submit start run  wait bsld
//	1   a      2    0      0     100  0    max(1, 100/100) = 1
//	2   b      4    10     100   5    90   (90+5)/max(5,10) = 9.5
//	3   a      1    20     120   20   100  (100+20)/20 = 6
//
// avg wait 190/3; sorted waits 0, 90, 100: p50 (rank 2) 90, p95 (rank 3)
// 100, max 100; avg bsld 16.5/3 = 5.5; work 2·100+4·5+1·20 = 240, last end
// 140, makespan 140, utilization 240/(4·140); tenants a 3.5, b 9.5: Jain
// 13²/(2·(3.5²+9.5²)) = 169/205; multi-node jobs 1 and 2, of which 1 spread
// avoidably: 0.5.
func TestComputeHandTrace(t *testing.T) {
	s := time.Second
	m := Compute([]Outcome{
		{Tenant: "a", Size: 2, Submit: 0, Start: 0, Runtime: 100 * s, MultiNode: true, Spread: true},
		{Tenant: "b", Size: 4, Submit: 10 * s, Start: 100 * s, Runtime: 5 * s, MultiNode: true},
		{Tenant: "a", Size: 1, Submit: 20 * s, Start: 120 * s, Runtime: 20 * s},
	}, 4, 0)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"jobs", float64(m.Jobs), 3},
		{"avg wait", m.AvgWait, 190.0 / 3},
		{"p50", m.P50Wait, 90},
		{"p95", m.P95Wait, 100},
		{"max", m.MaxWait, 100},
		{"avg bsld", m.AvgBoundedSlowdown, 5.5},
		{"makespan", m.Makespan, 140},
		{"utilization", m.Utilization, 240.0 / 560},
		{"jain", m.JainFairness, 169.0 / 205},
		{"multi group", m.MultiGroupJobs, 0.5},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestMetricHelpers(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"bsld short job bounded at 1", BoundedSlowdown(5*s, 2*s), 1},
		{"bsld short job uses tau", BoundedSlowdown(18*s, 2*s), 2},
		{"bsld long job", BoundedSlowdown(100*s, 100*s), 2},
		{"bsld no wait", BoundedSlowdown(0, 50*s), 1},
		{"p50 of 4", Percentile([]float64{1, 2, 3, 4}, 50), 2},
		{"p95 of 4", Percentile([]float64{1, 2, 3, 4}, 95), 4},
		{"p0 is min", Percentile([]float64{1, 2, 3, 4}, 0), 1},
		{"percentile of none", Percentile(nil, 50), 0},
		{"jain equal", Jain([]float64{3, 3, 3}), 1},
		{"jain one of n", Jain([]float64{1, 0, 0, 0}), 0.25},
		{"jain none", Jain(nil), 1},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if m := Compute(nil, 4, 0); m.Jobs != 0 || m.Utilization != 0 {
		t.Errorf("empty: %+v", m)
	}
}
