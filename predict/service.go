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
	// sum and sum2 are Σ and Σ² of the tenants' means, kept as runs are
	// observed (in that order: deterministic), for Threshold.
	sum, sum2 float64
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
	old := m.mean()
	m.add(b, end, s.HalfLife)
	s.all.add(b, end, s.HalfLife)
	now := m.mean()
	s.sum += now - old
	s.sum2 += now*now - old*old
}

// Threshold is x* = Σs²/Σs over the tenants' average bounded slowdowns s:
// Jain's index over them, (Σs)²/(n·Σs²), rises when a tenant above x* is
// served better and falls when one below it is (0 before any run ended).
func (s *Service) Threshold() float64 {
	if s == nil || len(s.tenants) < 2 || !(s.sum > 0) {
		return 0
	}
	return s.sum2 / s.sum
}

// UnknownLength is the length a job's bounded slowdown is reckoned with
// when only its walltime is known: the runtime for which
// (wait+r)/max(r, τ) − 1 is wait times the mean of 1/max(r, τ) over a
// runtime spread evenly in log scale between τ and the walltime,
// τ·ln(w/τ)/(1 − τ/w) — short jobs under long walltimes are common, and
// they are the ones a wait slows down most. The walltime itself up to τ.
func UnknownLength(walltime time.Duration) time.Duration {
	if walltime <= BoundedSlowdownTau {
		return walltime
	}
	w, tau := walltime.Seconds(), BoundedSlowdownTau.Seconds()
	return time.Duration(tau * math.Log(w/tau) / (1 - tau/w) * float64(time.Second))
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

// Tenant is tenant's average bounded slowdown over its completed jobs and
// the weight of those jobs as of now (each run 1, halved every half-life
// since it ended): how much one more job would move that average. 0, 0 for a
// tenant with no completed job.
func (s *Service) Tenant(tenant string, now time.Time) (mean, weight float64) {
	if s == nil {
		return 0, 0
	}
	m := s.tenants[tenant]
	if m == nil || m.weight <= 0 {
		return 0, 0
	}
	weight = m.weight
	if now.After(m.last) && s.HalfLife > 0 {
		weight *= math.Exp2(-float64(now.Sub(m.last)) / float64(s.HalfLife))
	}
	return m.mean(), weight
}

// Average is everyone's average bounded slowdown (0 before any run ended).
func (s *Service) Average() float64 {
	if s == nil {
		return 0
	}
	return s.all.mean()
}

// PendingBehind is the fair share of service for one pending job: how far
// its tenant's average bounded slowdown would be above everyone's (avg) if
// the job started now, counting the job at the slowdown it has reached,
// x = max(1, (wait+length)/max(length, τ)), with its expected length: 1 − avg/ŝ
// with ŝ = (weight·mean + x)/(weight + 1), mean and weight the tenant's
// (Service.Tenant); 0 when ŝ ≤ avg or avg is unknown. A tenant with little
// history is moved most by one job, so its short jobs that wait long rank
// up soonest — they are what lifts a per-user average far above everyone's.
func PendingBehind(avg, mean, weight float64, wait, length time.Duration) float64 {
	if !(avg > 0) || length <= 0 {
		return 0
	}
	if wait < 0 {
		wait = 0
	}
	x := BoundedSlowdown(wait, length)
	sh := (weight*mean + x) / (weight + 1)
	if sh <= avg {
		return 0
	}
	return 1 - avg/sh
}
