package replay

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/predict"
)

// BoundedSlowdownTau is τ of the bounded slowdown: runs shorter than this
// count as this long.
const BoundedSlowdownTau = predict.BoundedSlowdownTau

// Metrics is one replay's outcome; the JSON shape is CLI.md's
// `replay -o json`.
type Metrics struct {
	Policy   string `json:"policy"`
	Jobs     int    `json:"jobs"`
	Capacity int    `json:"capacity"`
	// Waits in seconds: start − eligible (the submit time, or when the
	// job's last dependency ended).
	AvgWait float64 `json:"avg_wait_s"`
	P50Wait float64 `json:"p50_wait_s"`
	P95Wait float64 `json:"p95_wait_s"`
	P99Wait float64 `json:"p99_wait_s"`
	MaxWait float64 `json:"max_wait_s"`
	// AvgBoundedSlowdown averages max(1, (wait+run)/max(run, τ)).
	AvgBoundedSlowdown float64 `json:"avg_bounded_slowdown"`
	// Utilization is Σ size·run / (capacity · (last end − first submit)).
	Utilization float64 `json:"utilization"`
	// Makespan is last end − first submit, in seconds.
	Makespan float64 `json:"makespan_s"`
	// Idle splits 1 − Utilization by why the nodes were idle (a replay's
	// metrics only; Compute leaves it zero).
	Idle IdleMetrics `json:"idle"`
	// JainFairness is Jain's index over the tenants' average bounded
	// slowdowns: (Σx)² / (n·Σx²); 1 = all tenants fare alike.
	JainFairness float64 `json:"jain_fairness"`
	// MultiGroupJobs is the share of multi-node jobs placed over more than
	// one dragonfly group although, at their start, the free nodes of one
	// group of their vCluster could have held them.
	MultiGroupJobs float64 `json:"multi_group_jobs"`
	// Prediction is the runtime predictor's accuracy (policies that
	// predict: lattice, easy++).
	Prediction *PredictionMetrics `json:"prediction,omitempty"`
	// ServiceNodeHours is what a service load's instances ran (service.go;
	// the other metrics leave them out), ServiceMaxWait the longest an
	// instance waited for its node, in seconds.
	ServiceNodeHours float64 `json:"service_node_hours,omitempty"`
	ServiceMaxWait   float64 `json:"service_max_wait_s,omitempty"`
	// Users has one row per tenant (the SWF user), most jobs first.
	Users []UserMetrics `json:"users,omitempty"`
	// Fairness compares the users' service with EASY's on the same trace
	// (CompareUsers; set by the caller that replayed both, as latticectl
	// replay does for every policy but easy).
	Fairness *Fairness `json:"fairness,omitempty"`
	// WallSeconds is the wall-clock time of the replay.
	WallSeconds float64 `json:"wall_seconds"`
	// Energy is reported when the replay has a power model (a price
	// schedule, a budget or node watts).
	Energy *EnergyMetrics `json:"energy,omitempty"`
}

// PredictionMetrics measures the runtime predictions the scheduler started
// jobs with.
type PredictionMetrics struct {
	// Jobs counts the jobs started with a prediction.
	Jobs int `json:"jobs"`
	// Accuracy is the mean of min(predicted, run) / max(predicted, run)
	// (1 = exact; Tsafrir's measure); runs under τ count as τ
	// (predict.Scores, which the live loop's prediction gauges use too).
	Accuracy float64 `json:"accuracy"`
	// Under is the share of jobs that ran longer than predicted (their
	// reservations were corrected while they ran).
	Under float64 `json:"underpredicted"`
	// WalltimeAccuracy is the same measure for the requested walltimes.
	WalltimeAccuracy float64 `json:"walltime_accuracy"`
}

// UserMetrics is one tenant's outcome.
type UserMetrics struct {
	Tenant             string  `json:"tenant"`
	Jobs               int     `json:"jobs"`
	AvgBoundedSlowdown float64 `json:"avg_bounded_slowdown"`
	AvgWait            float64 `json:"avg_wait_s"`
	MaxWait            float64 `json:"max_wait_s"`
}

// Result is a replay's metrics and, when asked, its time series.
type Result struct {
	Metrics
	Series *Series `json:"-"`
}

// Outcome is what the metrics need of one finished job.
type Outcome struct {
	Tenant  string
	Size    int
	Submit  time.Duration // eligible time (submit, or last dependency's end)
	Start   time.Duration
	Runtime time.Duration
	// Predicted is the runtime the scheduler predicted when it started the
	// job (0 = none); Estimate its requested walltime.
	Predicted, Estimate time.Duration
	// MultiNode, Spread: a multi-node job, placed over more than one group
	// although one group could have held it.
	MultiNode, Spread bool
}

func (s *sim) metrics() Metrics {
	out := make([]Outcome, 0, len(s.jobs))
	var first time.Duration
	var svcHours, svcWait float64
	for i := range s.jobs {
		r, j := &s.jobs[i], &s.tr.Jobs[i]
		if j.Service {
			svcHours += float64(j.Size) * j.Runtime.Hours()
			svcWait = max(svcWait, (r.start - r.eligible).Seconds())
			continue
		}
		if len(out) == 0 || j.Submit < first {
			first = j.Submit
		}
		out = append(out, Outcome{Tenant: j.Tenant, Size: j.Size, Submit: r.eligible, Start: r.start, Runtime: j.Runtime,
			MultiNode: j.Size > 1, Spread: r.avoidable, Predicted: r.predicted, Estimate: j.Estimate})
	}
	m := Compute(out, s.tr.Capacity, first)
	m.ServiceNodeHours, m.ServiceMaxWait = svcHours, svcWait
	m.Policy = s.label
	m.Idle = s.idleMetrics(m.Makespan)
	if s.energy != nil {
		m.Energy = s.energy.metrics()
	}
	return m
}

// Compute derives the metrics from finished jobs; first is the first submit
// time of the trace.
func Compute(jobs []Outcome, capacity int, first time.Duration) Metrics {
	m := Metrics{Jobs: len(jobs), Capacity: capacity}
	if len(jobs) == 0 {
		return m
	}
	waits := make([]float64, len(jobs))
	var sumWait, sumBSLD, work float64
	var lastEnd time.Duration
	type acc struct {
		sum, wait, maxWait float64
		n                  int
	}
	var pred predict.Scores
	tenants := map[string]*acc{}
	var order []string
	multi, spread := 0, 0
	for i, j := range jobs {
		wait := (j.Start - j.Submit).Seconds()
		waits[i] = wait
		sumWait += wait
		b := BoundedSlowdown(j.Start-j.Submit, j.Runtime)
		sumBSLD += b
		a := tenants[j.Tenant]
		if a == nil {
			a = &acc{}
			tenants[j.Tenant] = a
			order = append(order, j.Tenant)
		}
		a.sum += b
		a.wait += wait
		a.maxWait = max(a.maxWait, wait)
		a.n++
		if j.Predicted > 0 {
			pred.Add(j.Predicted, j.Estimate, j.Runtime)
		}
		work += float64(j.Size) * j.Runtime.Seconds()
		lastEnd = max(lastEnd, j.Start+j.Runtime)
		if j.MultiNode {
			multi++
			if j.Spread {
				spread++
			}
		}
	}
	n := float64(len(jobs))
	m.AvgWait = sumWait / n
	m.AvgBoundedSlowdown = sumBSLD / n
	slices.Sort(waits)
	m.P50Wait = Percentile(waits, 50)
	m.P95Wait = Percentile(waits, 95)
	m.P99Wait = Percentile(waits, 99)
	m.MaxWait = waits[len(waits)-1]
	m.Makespan = (lastEnd - first).Seconds()
	if m.Makespan > 0 && capacity > 0 {
		m.Utilization = work / (float64(capacity) * m.Makespan)
	}
	per := make([]float64, 0, len(order))
	for _, t := range order {
		a := tenants[t]
		per = append(per, a.sum/float64(a.n))
	}
	m.JainFairness = Jain(per)
	for _, t := range order {
		a := tenants[t]
		m.Users = append(m.Users, UserMetrics{Tenant: t, Jobs: a.n, AvgBoundedSlowdown: a.sum / float64(a.n),
			AvgWait: a.wait / float64(a.n), MaxWait: a.maxWait})
	}
	slices.SortStableFunc(m.Users, func(x, y UserMetrics) int {
		if x.Jobs != y.Jobs {
			return y.Jobs - x.Jobs
		}
		return strings.Compare(x.Tenant, y.Tenant)
	})
	if a := pred.Accuracy(); a.Runs > 0 {
		m.Prediction = &PredictionMetrics{Jobs: a.Runs, Accuracy: a.Prediction, Under: a.Underpredicted, WalltimeAccuracy: a.Walltime}
	}
	if multi > 0 {
		m.MultiGroupJobs = float64(spread) / float64(multi)
	}
	return m
}

// BoundedSlowdown is max(1, (wait+run)/max(run, τ)).
func BoundedSlowdown(wait, run time.Duration) float64 {
	return predict.BoundedSlowdown(wait, run)
}

// Percentile of sorted values by the nearest-rank method: the smallest value
// with at least p% of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Jain is Jain's fairness index (Σx)² / (n·Σx²); 1 for no or all-zero values.
func Jain(xs []float64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += x
		sq += x * x
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}
