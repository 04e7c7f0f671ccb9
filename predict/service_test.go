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

func TestPendingBehind(t *testing.T) {
	cases := []struct {
		name         string
		avg, mean, w float64
		wait, length time.Duration
		want         float64
	}{
		{"everyone's average unknown", 0, 0, 0, time.Hour, time.Minute, 0},
		{"no expected length", 5, 0, 0, time.Hour, 0, 0},
		// A newcomer's 10-minute job after 90 minutes: x = 10, avg 5.
		{"newcomer behind", 5, 0, 0, 90 * time.Minute, 10 * time.Minute, 0.5},
		{"newcomer not yet behind", 5, 0, 0, 30 * time.Minute, 10 * time.Minute, 0},
		// The same job of a tenant with 9 runs at bsld 1: ŝ = (9 + 10)/10.
		{"history dilutes one job", 5, 1, 9, 90 * time.Minute, 10 * time.Minute, 0},
		// A tenant served badly is behind even with a fresh job: ŝ = (3·9 + 1)/4 = 7.
		{"history behind", 5, 9, 3, 0, time.Hour, 1 - 5.0/7},
		// τ = 10 s: a 1-second job waiting 90 s has x = 9.1.
		{"short jobs count as τ", 2, 0, 0, 90 * time.Second, time.Second, 1 - 2/9.1},
		{"a negative wait counts as none", 0.5, 0, 0, -time.Hour, time.Minute, 1 - 0.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PendingBehind(c.avg, c.mean, c.w, c.wait, c.length); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("PendingBehind = %v, want %v", got, c.want)
			}
		})
	}
}

func TestServiceTenant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{HalfLife: time.Hour}
	if m, w := s.Tenant("a", t0); m != 0 || w != 0 || s.Average() != 0 {
		t.Fatalf("empty: Tenant = %v, %v, Average = %v; want zeros", m, w, s.Average())
	}
	s.Observe("a", t0, 90*time.Second, 10*time.Second) // bsld 10
	s.Observe("a", t0, 0, 10*time.Second)              // bsld 1
	s.Observe("b", t0, 0, 10*time.Second)              // bsld 1
	for _, c := range []struct {
		tenant  string
		at      time.Duration
		mean, w float64
	}{{"a", 0, 5.5, 2}, {"a", time.Hour, 5.5, 1}, {"a", -time.Hour, 5.5, 2}, {"b", 2 * time.Hour, 1, 0.25}, {"c", 0, 0, 0}} {
		if m, w := s.Tenant(c.tenant, t0.Add(c.at)); math.Abs(m-c.mean) > 1e-12 || math.Abs(w-c.w) > 1e-12 {
			t.Errorf("Tenant(%q, +%v) = %v, %v; want %v, %v", c.tenant, c.at, m, w, c.mean, c.w)
		}
	}
	if got := s.Average(); math.Abs(got-4) > 1e-12 {
		t.Errorf("Average = %v, want 4", got)
	}
	var nilService *Service
	if m, w := nilService.Tenant("a", t0); m != 0 || w != 0 || nilService.Average() != 0 {
		t.Errorf("nil Service: want zeros")
	}
}

func TestServiceThreshold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Service{}
	if got := s.Threshold(); got != 0 {
		t.Fatalf("empty: Threshold = %v, want 0", got)
	}
	s.Observe("a", t0, 0, 10*time.Second) // a: 1
	if got := s.Threshold(); got != 0 {
		t.Errorf("one tenant: Threshold = %v, want 0 (its index is always 1)", got)
	}
	s.Observe("b", t0, 90*time.Second, 10*time.Second) // b: 10
	if got, want := s.Threshold(), (1.0+100)/(1+10); math.Abs(got-want) > 1e-12 {
		t.Errorf("a 1, b 10: Threshold = %v, want %v", got, want)
	}
	s.Observe("b", t0, 0, 10*time.Second) // b: (10+1)/2 — its old mean is replaced
	if got, want := s.Threshold(), (1+5.5*5.5)/(1+5.5); math.Abs(got-want) > 1e-12 {
		t.Errorf("a 1, b 5.5: Threshold = %v, want %v", got, want)
	}
	var nilService *Service
	if nilService.Threshold() != 0 {
		t.Errorf("nil Service: Threshold != 0")
	}
}

func TestUnknownLength(t *testing.T) {
	for _, c := range []struct {
		walltime, want time.Duration
	}{
		{0, 0},
		{5 * time.Second, 5 * time.Second},
		{10 * time.Second, 10 * time.Second},
		// τ·ln(w/τ)/(1 − τ/w): 2 h → 65.9 s, 24 h → 90.6 s.
		{2 * time.Hour, time.Duration(10 * math.Log(720) / (1 - 1.0/720) * float64(time.Second))},
		{24 * time.Hour, time.Duration(10 * math.Log(8640) / (1 - 1.0/8640) * float64(time.Second))},
	} {
		if got := UnknownLength(c.walltime); got != c.want {
			t.Errorf("UnknownLength(%v) = %v, want %v", c.walltime, got, c.want)
		}
	}
	// It is the harmonic mean of max(r, τ) for r log-uniform on [τ, w]:
	// check against a numeric integral for 1 h.
	w, tau, n := 3600.0, 10.0, 200000
	var sum float64
	for i := range n {
		r := tau * math.Pow(w/tau, (float64(i)+0.5)/float64(n))
		sum += 1 / r
	}
	if got, want := UnknownLength(time.Hour).Seconds(), float64(n)/sum; math.Abs(got-want) > 1e-3*want {
		t.Errorf("UnknownLength(1h) = %v s, numeric %v s", got, want)
	}
}
