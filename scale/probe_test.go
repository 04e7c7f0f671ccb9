package scale

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseMetricsAndHistogramDelta(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`# HELP x
lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="0.01"} 1
lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="0.1"} 2
lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="+Inf"} 2
lattice_scheduler_cycle_duration_seconds_sum{vcluster="a"} 0.05
lattice_scheduler_cycle_duration_seconds_count{vcluster="a"} 2
lattice_allocations{state="COMPLETED",vcluster="a"} 3
lattice_allocations{state="COMPLETED",vcluster="b"} 4
lattice_allocations{state="PENDING",vcluster="b"} 9
`))
	if err != nil {
		t.Fatal(err)
	}
	after, _ := parseMetrics(strings.NewReader(`lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="0.01"} 1
lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="0.1"} 101
lattice_scheduler_cycle_duration_seconds_bucket{vcluster="a",le="+Inf"} 102
lattice_scheduler_cycle_duration_seconds_sum{vcluster="a"} 5.05
lattice_scheduler_cycle_duration_seconds_count{vcluster="a"} 102
`))
	if got := before.sum("lattice_allocations", `state="COMPLETED"`); got != 7 {
		t.Errorf("sum of COMPLETED = %v, want 7", got)
	}
	if got := before.labelValues("lattice_allocations", "vcluster"); strings.Join(got, ",") != "a,b" {
		t.Errorf("vclusters %v", got)
	}
	h := histDelta(before, after, "lattice_scheduler_cycle_duration_seconds", `vcluster="a"`)
	if h.Count != 100 || h.mean() != 0.05 || h.quantile(0.5) != 0.1 || h.quantile(0.99) != 0.1 || !math.IsInf(h.quantile(1), 1) {
		t.Errorf("delta %+v mean %v p50 %v", h, h.mean(), h.quantile(0.5))
	}
}

func TestParseWeighted(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
		n  int
	}{{"1:60,2:20", true, 2}, {"30", true, 1}, {"1:0", false, 0}, {"x", false, 0}, {"", false, 0}, {"-1:3", false, 0}} {
		w, err := ParseWeighted("sizes", tc.in)
		if (err == nil) != tc.ok || len(w.Values) != tc.n {
			t.Errorf("%q: %v, %v", tc.in, w, err)
		}
	}
}

func TestLatencyQuantiles(t *testing.T) {
	l := &latencies{}
	for i := 1; i <= 100; i++ {
		l.add(submission{took: time.Duration(i) * time.Millisecond}, nil)
	}
	p50, p99, mx, n := l.quantiles()
	if n != 100 || p50 != 51*time.Millisecond || p99 != 100*time.Millisecond || mx != 100*time.Millisecond {
		t.Errorf("p50 %v p99 %v max %v n %d", p50, p99, mx, n)
	}
}
