package predict

import (
	"math"
	"testing"
	"time"
)

func TestServiceBehind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type run struct {
		tenant     string
		at         time.Duration // end, from t0
		wait, runs time.Duration
	}
	cases := []struct {
		name     string
		halfLife time.Duration
		runs     []run
		tenant   string
		want     float64
	}{
		{"nothing known", 0, nil, "a", 0},
		{"unknown tenant", 0, []run{{"a", 0, time.Hour, time.Hour}}, "b", 0},
		{"the only tenant is the average", 0, []run{{"a", 0, time.Hour, time.Hour}}, "a", 0},
		// a: bsld 1; b: (90+10)/10 = 10; everyone 5.5: b is 1 − 5.5/10 behind.
		{"behind the average", 0, []run{{"a", 0, 0, 10 * time.Second}, {"b", 0, 90 * time.Second, 10 * time.Second}}, "b", 0.45},
		{"ahead of the average", 0, []run{{"a", 0, 0, 10 * time.Second}, {"b", 0, 90 * time.Second, 10 * time.Second}}, "a", 0},
		// τ = 10 s: a 1-second run waiting 90 s has bsld (90+1)/10.
		{"short runs count as τ", 0, []run{{"a", 0, 0, time.Second}, {"b", 0, 90 * time.Second, time.Second}}, "b", 1 - (1+9.1)/2/9.1},
		// b's bad run is one half-life older than a's good one: weights
		// 1/2 and 1, so everyone's mean is (10/2 + 1)/1.5 = 4.
		{"old runs weigh less", time.Hour, []run{{"b", 0, 90 * time.Second, 10 * time.Second}, {"a", time.Hour, 0, 10 * time.Second}}, "b", 1 - 4.0/10},
		{"a negative wait counts as none", 0, []run{{"a", 0, 0, 10 * time.Second}, {"b", 0, -time.Hour, 10 * time.Second}}, "b", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Service{HalfLife: c.halfLife}
			for _, r := range c.runs {
				s.Observe(r.tenant, t0.Add(r.at), r.wait, r.runs)
			}
			if got := s.Behind(c.tenant); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("Behind(%q) = %v, want %v", c.tenant, got, c.want)
			}
		})
	}
	var nilService *Service
	if got := nilService.Behind("a"); got != 0 {
		t.Errorf("nil Service: Behind = %v, want 0", got)
	}
}

func TestBoundedSlowdown(t *testing.T) {
	cases := []struct {
		wait, run time.Duration
		want      float64
	}{
		{0, time.Hour, 1},
		{time.Hour, time.Hour, 2},
		{90 * time.Second, time.Second, 9.1},
		{0, 0, 1},
	}
	for _, c := range cases {
		if got := BoundedSlowdown(c.wait, c.run); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("BoundedSlowdown(%v, %v) = %v, want %v", c.wait, c.run, got, c.want)
		}
	}
}
