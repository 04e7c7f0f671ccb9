package replay

import (
	"reflect"
	"testing"
	"time"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		spec string
		name string
		vals []string
	}{
		{"w3=0:0.5:0.1", "w3", []string{"0", "0.1", "0.2", "0.3", "0.4", "0.5"}},
		{"f2=0.1,0.3", "w2", []string{"0.1", "0.3"}},
		{"profile=balanced,hpc-batch", "profile", []string{"balanced", "hpc-batch"}},
		{"reservation-depth=1,2,all,none", "reservation-depth", []string{"1", "2", "all", "none"}},
		{"cycle=0,30s", "cycle", []string{"0", "30s"}},
	} {
		d, err := ParseSweep(tc.spec)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		if d.Name != tc.name || !reflect.DeepEqual(d.Values, tc.vals) {
			t.Errorf("%s: got %s=%v, want %s=%v", tc.spec, d.Name, d.Values, tc.name, tc.vals)
		}
	}
	for _, bad := range []string{"w3", "w0=0.1", "w3=0.5:0:0.1", "w3=0:1:0", "w3=2", "profile=nope", "reservation-depth=-3", "colour=1"} {
		if _, err := ParseSweep(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestGridAndBest(t *testing.T) {
	a, _ := ParseSweep("w3=0,0.5")
	b, _ := ParseSweep("reservation-depth=1,all")
	grid, err := Grid(Config{Policy: PolicyLattice, Cycle: time.Second}, []SweepDim{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, s := range grid {
		labels = append(labels, s.Label)
	}
	want := []string{"w3=0 reservation-depth=1", "w3=0 reservation-depth=all", "w3=0.5 reservation-depth=1", "w3=0.5 reservation-depth=all"}
	if !reflect.DeepEqual(labels, want) {
		t.Fatalf("labels %v, want %v", labels, want)
	}
	if c := grid[3].Config; c.Weights[2] != 0.5 || c.ReservationDepth != -1 || c.Cycle != time.Second {
		t.Errorf("last setting %+v", c)
	}
	if grid[0].Config.Weights[2] != 0 {
		t.Error("settings share their weight overrides")
	}

	baselines := []Metrics{{Utilization: 0.80}, {Utilization: 0.90}}
	settings := []Metrics{
		{AvgBoundedSlowdown: 5, Utilization: 0.85},  // lowest bsld, but loses 0.05 utilization
		{AvgBoundedSlowdown: 9, Utilization: 0.895}, // within 0.01 of 0.90
		{AvgBoundedSlowdown: 8, Utilization: 0.91},  // best
		{AvgBoundedSlowdown: 8, Utilization: 0.92},  // tie: the earlier wins
	}
	if got := Best(settings, baselines, 0.01); got != 2 {
		t.Errorf("best %d, want 2", got)
	}
	if got := Best(settings[:1], baselines, 0.01); got != -1 {
		t.Errorf("best %d, want -1 (none keeps the utilization)", got)
	}
}
