package server

import (
	"testing"
	"time"
)

func TestMeasuredPowerKeepsFreshFigures(t *testing.T) {
	var p measuredPower
	t0 := time.Unix(1000, 0)
	p.record([]string{"n1"}, []int32{300}, t0)
	p.record([]string{"n2", "n3"}, []int32{250, 0}, t0.Add(10*time.Second)) // n3 unmeasured
	p.record([]string{"n4"}, nil, t0.Add(10*time.Second))                   // an agent that does not measure
	if w, n := p.total(t0.Add(-time.Second)); w != 550 || n != 2 {
		t.Errorf("total %d W on %d nodes, want 550 on 2", w, n)
	}
	if w, n := p.total(t0.Add(5 * time.Second)); w != 250 || n != 1 {
		t.Errorf("after n1 went stale: %d W on %d nodes, want 250 on 1", w, n)
	}
}
