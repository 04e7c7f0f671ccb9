package leader

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Services' controller (issue 31, docs/services.md). Once a cycle, for
// every service, it keeps the committed desired count of instances
// running: it starts instances that are missing (an instance that ended on
// its own is restarted with an exponential back-off; a crash loop is the
// service's CrashLoopBackOff reason), stops surplus ones (SIGTERM, the
// service's drain time, SIGKILL), and moves instances off nodes being
// drained or lost. It computes the desired count Kubernetes HPA style from
// the samples the agents scrape: ceil(instances × average / target),
// clamped to [min, max], within a 10 % tolerance, taking for a scale-down
// the highest recommendation of the stabilization window, and changing it
// at most once per cooldown. Each step is one ScaleService command; new
// instances are pending one-node allocations the service's vCluster
// scheduler places like any other (scored by the solver, borrowing or
// preempting as the vCluster's policy allows). A rejected step is planned
// again from fresh state next cycle.

// ServiceSample is the latest a node agent scraped from one instance.
type ServiceSample struct {
	Alloc    uint64
	Endpoint string
	Has      bool
	Value    float64
	Err      string
	At       time.Time
}

// ServiceSamples holds the samples heartbeats bring (off the Raft log:
// a new leader has them again at the agents' next heartbeats).
type ServiceSamples struct {
	mu sync.Mutex
	m  map[uint64]ServiceSample
}

// NewServiceSamples returns an empty store.
func NewServiceSamples() *ServiceSamples {
	return &ServiceSamples{m: map[uint64]ServiceSample{}}
}

// Record stores samples, forgetting those older than an hour.
func (s *ServiceSamples) Record(xs []ServiceSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range xs {
		s.m[x.Alloc] = x
	}
	if len(xs) == 0 {
		return
	}
	old := xs[0].At.Add(-time.Hour)
	for id, x := range s.m {
		if x.At.Before(old) {
			delete(s.m, id)
		}
	}
}

// Get returns the latest sample of an instance.
func (s *ServiceSamples) Get(id uint64) (ServiceSample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.m[id]
	return x, ok
}

// ServiceHost is what the controller needs of its member.
type ServiceHost interface {
	View(fn func(*quorum.State))
	Propose(ctx context.Context, c quorum.Command) (*quorum.Result, error)
}

// ServiceMetrics are the services' gauges and counters.
type ServiceMetrics struct {
	Replicas *prometheus.GaugeVec
	Desired  *prometheus.GaugeVec
	Events   *prometheus.CounterVec
}

// NewServiceMetrics registers the services' metrics with reg.
func NewServiceMetrics(reg prometheus.Registerer) *ServiceMetrics {
	m := &ServiceMetrics{
		Replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_service_replicas",
			Help: "Running instances of a service (not being stopped)."}, []string{"service"}),
		Desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lattice_service_desired_replicas",
			Help: "The instance count a service's controller keeps."}, []string{"service"}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lattice_service_scaling_events_total",
			Help: "Committed changes of a service's desired instance count, by direction (up, down)."}, []string{"direction"}),
	}
	reg.MustRegister(m.Replicas, m.Desired, m.Events)
	m.Events.WithLabelValues(model.ScaleUp)
	m.Events.WithLabelValues(model.ScaleDown)
	return m
}

// ServiceController is the leader's loop over services.
type ServiceController struct {
	Host    ServiceHost
	Samples *ServiceSamples
	Metrics *ServiceMetrics // nil: none
	Clock   func() time.Time
	Log     *slog.Logger
	// Interval is the cycle (default 2 s); SampleMaxAge how old a sample
	// may be to count (default 60 s).
	Interval     time.Duration
	SampleMaxAge time.Duration
	// BackoffBase doubles after each failed start in a row up to
	// BackoffMax (defaults 1 s and 5 min); an instance that ran
	// BackoffReset (default 60 s) ends the row.
	BackoffBase, BackoffMax, BackoffReset time.Duration

	// recs is each service's recent recommendations (the stabilization
	// window), in this leader's memory.
	recs  map[string][]recommendation
	known map[string]bool
}

type recommendation struct {
	at    time.Time
	count int
}

// Tolerance is the relative distance from the target within which the
// desired count does not change (as HPA's default).
const Tolerance = 0.1

// CrashLoopFailures is how many quick failures in a row make a crash loop.
const CrashLoopFailures = 3

func (c *ServiceController) defaults() {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.SampleMaxAge <= 0 {
		c.SampleMaxAge = time.Minute
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Minute
	}
	if c.BackoffReset <= 0 {
		c.BackoffReset = time.Minute
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.recs == nil {
		c.recs = map[string][]recommendation{}
		c.known = map[string]bool{}
	}
}

// Run runs cycles until ctx ends.
func (c *ServiceController) Run(ctx context.Context) {
	c.defaults()
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	for {
		c.Cycle(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Cycle plans and proposes one step per service that needs one.
func (c *ServiceController) Cycle(ctx context.Context) {
	c.defaults()
	now := c.Clock()
	var steps []*quorum.ScaleService
	seen := map[string]bool{}
	c.Host.View(func(st *quorum.State) {
		for _, v := range st.Services() {
			seen[v.Name] = true
			p := c.plan(st, v, now)
			if c.Metrics != nil {
				c.Metrics.Replicas.WithLabelValues(v.Name).Set(float64(p.replicas))
				c.Metrics.Desired.WithLabelValues(v.Name).Set(float64(v.Desired))
			}
			if p.step != nil {
				steps = append(steps, p.step)
			}
		}
	})
	for name := range c.known {
		if !seen[name] {
			delete(c.known, name)
			delete(c.recs, name)
			if c.Metrics != nil {
				c.Metrics.Replicas.DeleteLabelValues(name)
				c.Metrics.Desired.DeleteLabelValues(name)
			}
		}
	}
	for name := range seen {
		c.known[name] = true
	}
	for _, step := range steps {
		step.Time = now
		r, err := c.Host.Propose(ctx, step)
		switch {
		case err != nil:
			c.Log.Warn("service step not committed; retried next cycle", "service", step.Name, "err", err)
		case r.Rejection != nil:
			c.Log.Info("service step rejected; planned again next cycle", "service", step.Name, "why", r.Rejection.Message)
		default:
			if d := step.Decision; d != nil {
				c.Log.Info("service scaled", "service", step.Name, "from", d.From, "to", d.To, "reason", d.Reason)
				if c.Metrics != nil {
					c.Metrics.Events.WithLabelValues(d.Direction).Inc()
					c.Metrics.Desired.WithLabelValues(step.Name).Set(float64(step.Desired))
				}
			}
		}
	}
}

// plan is one service's step (nil: nothing to change) and what it saw.
type plan struct {
	step     *quorum.ScaleService
	replicas int
}

// Average returns the average of the fresh samples of a service's running
// instances and how many there were.
func Average(st *quorum.State, v *model.Service, samples *ServiceSamples, now time.Time, maxAge time.Duration) (avg float64, n int) {
	sum := 0.0
	for _, id := range v.Instances {
		a := st.Allocation(id)
		if a == nil || a.State != model.StateRunning || a.CancelRequested {
			continue
		}
		x, ok := samples.Get(id)
		if !ok || !x.Has || now.Sub(x.At) > maxAge {
			continue
		}
		sum += x.Value
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return sum / float64(n), n
}

// runningInstances counts a service's running instances not being stopped.
func runningInstances(st *quorum.State, v *model.Service) int {
	n := 0
	for _, id := range v.Instances {
		if a := st.Allocation(id); a != nil && a.State == model.StateRunning && !a.CancelRequested {
			n++
		}
	}
	return n
}

func nodeGone(st *quorum.State, a *model.Allocation) bool {
	for _, name := range a.Nodes {
		n := st.Node(name)
		if n == nil {
			return true
		}
		switch n.State {
		case model.NodeDraining, model.NodeDrained, model.NodeDown:
			return true
		}
	}
	return false
}

func (c *ServiceController) plan(st *quorum.State, v *model.Service, now time.Time) plan {
	step := &quorum.ScaleService{Name: v.Name, Desired: v.Desired, Failures: v.Failures, RestartAfter: v.RestartAfter,
		Reason: v.Reason, ReasonDetail: v.ReasonDetail, StopReason: model.ReasonCancelled}
	var live []*model.Allocation // not ending, not being stopped
	var ended *model.Allocation  // the latest that ended on its own
	var p plan
	settled := false // a restarted instance has run long enough to end a crash loop
	for _, id := range v.Instances {
		a := st.Allocation(id)
		switch {
		case a == nil:
			step.Forget = append(step.Forget, id)
		case a.State.Terminal():
			step.Forget = append(step.Forget, id)
			if a.State != model.StateCancelled {
				step.Restarts++
				step.Failures++
				if !a.StartTime.IsZero() && a.EndTime.Sub(a.StartTime) >= c.BackoffReset {
					step.Failures = 1
				}
				if ended == nil || a.EndTime.After(ended.EndTime) {
					ended = a
				}
			}
		case a.CancelRequested:
		case a.State.Active() && nodeGone(st, a):
			step.Stop = append(step.Stop, id) // moved: a replacement starts below
		default:
			live = append(live, a)
			if a.State == model.StateRunning {
				p.replicas++
				// A restart (started after the back-off) that keeps running ends a crash loop.
				if !a.StartTime.IsZero() && !a.StartTime.Before(v.RestartAfter) && now.Sub(a.StartTime) >= c.BackoffReset {
					settled = true
				}
			}
		}
	}
	if ended != nil {
		delay := c.BackoffBase << min(step.Failures-1, 30)
		if delay > c.BackoffMax || delay <= 0 {
			delay = c.BackoffMax
		}
		step.RestartAfter = now.Add(delay)
		if step.Failures >= CrashLoopFailures {
			step.Reason = model.ReasonCrashLoopBackOff
			step.ReasonDetail = fmt.Sprintf("instance %d ended %s (%s) after %s, %d times in a row; next start in %s",
				ended.ID, ended.State, endDetail(ended), ended.EndTime.Sub(ended.StartTime).Round(time.Second), step.Failures, delay)
		}
	} else if settled && step.Failures > 0 {
		step.Failures, step.RestartAfter, step.Reason, step.ReasonDetail = 0, time.Time{}, "", ""
	}

	// The desired count.
	want, why := c.recommend(st, v, now)
	c.remember(v, now, want) // the raw recommendation
	if want < v.Desired && now.Sub(v.LastChange) >= v.Cooldown {
		// Scale down to the highest recommendation of the window.
		floor := want
		for _, r := range c.recs[v.Name] {
			if now.Sub(r.at) <= v.Stabilization && r.count > floor {
				floor = r.count
			}
		}
		if floor > want {
			why = fmt.Sprintf("%s; stabilized at %d, the highest recommendation of the last %s", why, floor, v.Stabilization)
		}
		want = floor
	}
	if want != v.Desired && now.Sub(v.LastChange) >= v.Cooldown {
		dir := model.ScaleUp
		if want < v.Desired {
			dir = model.ScaleDown
		}
		step.Desired = want
		step.Decision = &model.ServiceDecision{Time: now, From: v.Desired, To: want, Direction: dir, Reason: why}
	}

	// Keep step.Desired instances live.
	switch n := len(live); {
	case n > step.Desired:
		slices.SortFunc(live, func(x, y *model.Allocation) int {
			if rx, ry := stopRank(x), stopRank(y); rx != ry {
				return rx - ry
			}
			return -cmp.Compare(x.ID, y.ID) // newest first
		})
		for _, a := range live[:n-step.Desired] {
			step.Stop = append(step.Stop, a.ID)
		}
	case n < step.Desired:
		if step.RestartAfter.IsZero() || !now.Before(step.RestartAfter) {
			step.Start = step.Desired - n
			r := v.InstanceRequest()
			step.Request = &r
		}
	}
	if step.Start == 0 && len(step.Stop) == 0 && len(step.Forget) == 0 && step.Decision == nil && step.Restarts == 0 &&
		step.Failures == v.Failures && step.RestartAfter.Equal(v.RestartAfter) && step.Reason == v.Reason && step.ReasonDetail == v.ReasonDetail {
		return p
	}
	slices.Sort(step.Stop)
	p.step = step
	return p
}

func endDetail(a *model.Allocation) string {
	if a.ExitCode != nil {
		return fmt.Sprintf("%s, exit code %d", a.Reason, *a.ExitCode)
	}
	return a.Reason
}

// stopRank orders instances for a scale-down: pending first, then
// starting, then running.
func stopRank(a *model.Allocation) int {
	switch a.State {
	case model.StatePending, model.StateSuspended:
		return 0
	case model.StateStaging:
		return 1
	}
	return 2
}

// recommend is the count the metric asks for now, clamped, and why.
func (c *ServiceController) recommend(st *quorum.State, v *model.Service, now time.Time) (int, string) {
	clamp := func(n int) int { return min(max(n, v.MinNodes), v.MaxNodes) }
	if v.Metric == "" {
		return clamp(v.Desired), "no scale metric"
	}
	avg, n := Average(st, v, c.Samples, now, c.SampleMaxAge)
	if n == 0 {
		return clamp(v.Desired), "no samples of " + v.Metric
	}
	ratio := avg / v.Target
	if math.Abs(ratio-1) <= Tolerance {
		return clamp(v.Desired), fmt.Sprintf("%s average %.4g within %.0f%% of target %.4g", v.Metric, avg, Tolerance*100, v.Target)
	}
	raw := int(math.Ceil(float64(n) * ratio))
	if running := runningInstances(st, v); raw < v.Desired && n < running {
		// Not every running instance reports yet: no scale-down on a
		// partial view. (Instances still pending do not count: a service
		// that cannot place all it wants must still be able to shrink.)
		return clamp(v.Desired), fmt.Sprintf("%d of %d running instances report %s", n, running, v.Metric)
	}
	want := clamp(raw)
	why := fmt.Sprintf("%s average %.4g over %d instances, target %.4g: ceil(%d × %.4g / %.4g) = %d", v.Metric, avg, n, v.Target, n, avg, v.Target, raw)
	if want != raw {
		why += fmt.Sprintf(", clamped to [%d, %d]", v.MinNodes, v.MaxNodes)
	}
	return want, why
}

// remember adds a recommendation to the service's window.
func (c *ServiceController) remember(v *model.Service, now time.Time, count int) {
	rs := c.recs[v.Name]
	rs = slices.DeleteFunc(rs, func(r recommendation) bool { return now.Sub(r.at) > v.Stabilization })
	c.recs[v.Name] = append(rs, recommendation{at: now, count: count})
}
