package scale

import (
	"errors"
	"math"
	"reflect"
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

func TestLatencyWindows(t *testing.T) {
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name string
		subs []submission // sent is an offset from began in the table
		errs []bool
		want []Window
	}{
		{name: "no submissions", want: []Window{}},
		{name: "one window, p99 the slowest of few, errors left out",
			subs: []submission{{sent: began.Add(1 * time.Second), took: 2 * ms}, {sent: began.Add(2 * time.Second), took: 30 * ms},
				{sent: began.Add(3 * time.Second), took: 4 * ms}, {sent: began.Add(4 * time.Second), took: 900 * ms}},
			errs: []bool{false, false, false, true},
			want: []Window{{FromS: 0, ToS: 10, Sent: 3, P50ms: 4, P99ms: 30, Over10pct: 100.0 / 3}}},
		{name: "a slow first window, an empty one, a fast third",
			subs: []submission{{sent: began, took: 50 * ms}, {sent: began.Add(9 * time.Second), took: 70 * ms},
				{sent: began.Add(25 * time.Second), took: 3 * ms}},
			want: []Window{{FromS: 0, ToS: 10, Sent: 2, P50ms: 70, P99ms: 70, Over10pct: 100}, {FromS: 10, ToS: 20},
				{FromS: 20, ToS: 30, Sent: 1, P50ms: 3, P99ms: 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &latencies{log: []submission{}}
			for i, s := range tc.subs {
				var err error
				if i < len(tc.errs) && tc.errs[i] {
					err = errors.New("refused")
				}
				l.add(s, err)
			}
			if got := l.windows(began, 10*time.Second); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("windows:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
