package predict

import (
	"math"
	"time"
)

// Service is what the fair share of service learns: each tenant's average
// bounded slowdown over its completed jobs, and every tenant's together,
// each run weighted by 2^(−age/half-life) (the fair-share usage's decay).
// Pure and deterministic like History: fed completed runs in the order they
// ended, no clock, no map iteration.
type Service struct {
	HalfLife time.Duration
	tenants  map[string]*decayedMean
	all      decayedMean
}

// decayedMean is Σ w·x and Σ w as of last; the mean Σw·x/Σw does not change
// with time, only each new run's weight against the old ones.
type decayedMean struct {
	sum, weight float64
	last        time.Time
}

func (m *decayedMean) add(x float64, at time.Time, halfLife time.Duration) {
	if !m.last.IsZero() && at.After(m.last) && halfLife > 0 {
		f := math.Exp2(-float64(at.Sub(m.last)) / float64(halfLife))
		m.sum *= f
		m.weight *= f
	}
	if at.After(m.last) {
		m.last = at
	}
	m.sum += x
	m.weight++
}

func (m *decayedMean) mean() float64 {
	if m == nil || m.weight <= 0 {
		return 0
	}
	return m.sum / m.weight
}

// BoundedSlowdownTau is τ of the bounded slowdown.
const BoundedSlowdownTau = 10 * time.Second

// BoundedSlowdown is max(1, (wait+run)/max(run, τ)).
func BoundedSlowdown(wait, run time.Duration) float64 {
	return max(1, (wait+run).Seconds()/max(run, BoundedSlowdownTau).Seconds())
}

// Observe records tenant's run that ended at end after waiting wait and
// running run.
func (s *Service) Observe(tenant string, end time.Time, wait, run time.Duration) {
	if wait < 0 {
		wait = 0
	}
	b := BoundedSlowdown(wait, run)
	if s.tenants == nil {
		s.tenants = map[string]*decayedMean{}
	}
	m := s.tenants[tenant]
	if m == nil {
		m = &decayedMean{}
		s.tenants[tenant] = m
	}
	m.add(b, end, s.HalfLife)
	s.all.add(b, end, s.HalfLife)
}

// Behind is how far tenant's service is behind everyone's: 1 − S/s, where
// s is its average bounded slowdown and S everyone's (0 when it is served at
// least as well as the average, or unknown; towards 1 as s grows past S).
func (s *Service) Behind(tenant string) float64 {
	if s == nil {
		return 0
	}
	t := s.tenants[tenant].mean()
	all := s.all.mean()
	if t <= 0 || all <= 0 || t <= all {
		return 0
	}
	return 1 - all/t
}
