package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Weighted is a choice among values by weight: "1:60,2:20,4:10" (value:weight).
type Weighted struct {
	Values  []float64
	Weights []float64
}

// ParseWeighted reads "VALUE:WEIGHT,..." (a VALUE alone weighs 1).
func ParseWeighted(field, s string) (Weighted, error) {
	var w Weighted
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		v, wt, has := strings.Cut(part, ":")
		val, err := strconv.ParseFloat(v, 64)
		weight := 1.0
		if has {
			weight, err = strconv.ParseFloat(wt, 64)
		}
		if err != nil || val <= 0 || weight <= 0 {
			return w, fmt.Errorf("invalid %s %q: allowed VALUE[:WEIGHT],... with positive numbers, e.g. 1:60,4:30,32:10", field, s)
		}
		w.Values = append(w.Values, val)
		w.Weights = append(w.Weights, weight)
	}
	if len(w.Values) == 0 {
		return w, fmt.Errorf("invalid %s %q: allowed VALUE[:WEIGHT],... with at least one value", field, s)
	}
	return w, nil
}

func (w Weighted) pick(r *rand.Rand) float64 {
	total := 0.0
	for _, x := range w.Weights {
		total += x
	}
	t := r.Float64() * total
	for i, x := range w.Weights {
		if t < x {
			return w.Values[i]
		}
		t -= x
	}
	return w.Values[len(w.Values)-1]
}

// Mix is the job mix the harness submits.
type Mix struct {
	Sizes    Weighted // nodes per job
	Runtimes Weighted // seconds a (virtual) run lasts; walltime is twice that, at least a minute
	// ArrayFraction of submissions are arrays of ArrayTasks tasks.
	ArrayFraction float64
	ArrayTasks    int
	// MLFraction of submissions go to ml-training, the rest to hpc-batch;
	// BorrowFraction of the ML ones are checkpointable, so they may borrow
	// idle hpc-batch nodes.
	MLFraction     float64
	BorrowFraction float64
	Tenants        []string
}

// request draws one submission.
func (m *Mix) request(r *rand.Rand, arrays bool) *latticev1.AllocationRequest {
	size := int32(m.Sizes.pick(r))
	run := m.Runtimes.pick(r)
	wall := max(60, int64(2*run))
	req := &latticev1.AllocationRequest{
		Name: "bench", Tenant: m.Tenants[r.IntN(len(m.Tenants))], Vcluster: "hpc-batch",
		NodesMin: size, WalltimeSeconds: wall, Command: []string{"sleep", strconv.FormatFloat(run, 'f', -1, 64)},
		PriorityClass: int32(r.IntN(6)),
	}
	if r.Float64() < m.MLFraction {
		req.Vcluster = "ml-training"
		if r.Float64() < m.BorrowFraction {
			req.Checkpoint = "signal"
		}
	}
	if arrays && m.ArrayTasks > 1 && r.Float64() < m.ArrayFraction {
		req.NodesMin = 1
		req.Array = &latticev1.ArraySpec{Start: 0, End: int32(m.ArrayTasks - 1), Step: 1}
	}
	return req
}

// latencies records submission latencies, safely from many goroutines.
type latencies struct {
	mu     sync.Mutex
	d      []time.Duration
	errors int
	first  string
	// log, when set, keeps every submission (sent, took, member, error)
	// for the time series in DIR/submits.csv.
	log []submission
}

// submission is one timed Submit of the time series.
type submission struct {
	sent   time.Time
	took   time.Duration
	member string
	err    bool
}

// writeSeries writes the time series as CSV: milliseconds from began to
// the send, the latency in milliseconds, the member, 1 for an error.
func (l *latencies) writeSeries(path string, began time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString("sent_ms,latency_ms,member,error\n")
	for _, s := range l.log {
		e := 0
		if s.err {
			e = 1
		}
		fmt.Fprintf(&b, "%.3f,%.3f,%s,%d\n", float64(s.sent.Sub(began).Microseconds())/1000, float64(s.took.Microseconds())/1000, s.member, e)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// add counts one submission: its latency, or its error; and keeps it in
// the time series when that is kept.
func (l *latencies) add(s submission, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.log != nil {
		s.err = err != nil
		l.log = append(l.log, s)
	}
	if err != nil {
		l.errors++
		if l.first == "" {
			l.first = err.Error()
		}
		return
	}
	l.d = append(l.d, s.took)
}

// Window is the submissions sent in one slice of the measuring window: a
// p99 over the whole minute hides when the slow ones happened (the first
// seconds, while a backlog fills the idle nodes, differ from the rest).
type Window struct {
	FromS     float64 `json:"from_s"`
	ToS       float64 `json:"to_s"`
	Sent      int     `json:"sent"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	Over10pct float64 `json:"over_10ms_percent"`
}

// windows splits the kept submissions (errors left out) by the time they
// were sent, from began, into slices of width; none without a kept series.
func (l *latencies) windows(began time.Time, width time.Duration) []Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	var by [][]time.Duration
	for _, s := range l.log {
		if s.err {
			continue
		}
		i := max(0, int(s.sent.Sub(began)/width))
		for len(by) <= i {
			by = append(by, nil)
		}
		by[i] = append(by[i], s.took)
	}
	out := make([]Window, 0, len(by))
	for i, d := range by {
		w := Window{FromS: (time.Duration(i) * width).Seconds(), ToS: (time.Duration(i+1) * width).Seconds(), Sent: len(d)}
		if len(d) > 0 {
			slices.Sort(d)
			w.P50ms, w.P99ms = ms(quantile(d, 0.50)), ms(quantile(d, 0.99))
			over := 0
			for _, x := range d {
				if x > 10*time.Millisecond {
					over++
				}
			}
			w.Over10pct = 100 * float64(over) / float64(len(d))
		}
		out = append(out, w)
	}
	return out
}

// quantiles returns p50, p99 and the maximum.
func (l *latencies) quantiles() (p50, p99, maxd time.Duration, n int) {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(d)
	return quantile(d, 0.50), quantile(d, 0.99), d[len(d)-1], len(d)
}

// quantile is the p-quantile of sorted, which is not empty.
func quantile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// submitAtRate submits one request per 1/rate through the members in turn,
// until ctx ends, recording each call's latency.
//
// Each latency is also added to direct when the member it was sent to is
// leader (the one it was when measuring began), else to forwarded.
func submitAtRate(ctx context.Context, members []*member, leader *member, rate float64, mix *Mix, seed uint64, lat, direct, forwarded *latencies) int {
	r := rand.New(rand.NewPCG(seed, 7))
	period := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	n := 0
	for {
		next = next.Add(period)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return n
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			wg.Wait()
			return n
		}
		m := members[n%len(members)]
		req := &latticev1.SubmitRequest{Request: mix.request(r, false), ClientRequestId: fmt.Sprintf("bench-%d-%d", seed, n)}
		n++
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			began := time.Now()
			_, err := m.allocs.Submit(cctx, req)
			cancel()
			sub := submission{sent: began, took: time.Since(began), member: m.id}
			lat.add(sub, err)
			if m == leader {
				direct.add(sub, err)
			} else {
				forwarded.add(sub, err)
			}
		}()
	}
}

// submitBacklog submits about want allocations in SubmitBatch calls of
// batch requests each, to the leader, and returns how many it created.
func submitBacklog(ctx context.Context, c *cluster, want, batch int, mix *Mix, seed uint64) (int, error) {
	r := rand.New(rand.NewPCG(seed, 11))
	created := 0
	for created < want {
		l, err := c.leader(ctx)
		if err != nil {
			return created, err
		}
		br := &latticev1.SubmitBatchRequest{}
		planned := 0
		for planned < want-created && len(br.Requests) < batch {
			req := mix.request(r, true)
			if a := req.Array; a != nil && int(a.End)+1 > want-created-planned {
				req.Array = nil
			}
			if a := req.Array; a != nil {
				planned += int(a.End-a.Start) + 1
			} else {
				planned++
			}
			br.Requests = append(br.Requests, &latticev1.SubmitRequest{Request: req})
		}
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		resp, err := l.allocs.SubmitBatch(cctx, br)
		cancel()
		if err != nil {
			return created, fmt.Errorf("backlog batch: %w", err)
		}
		for _, res := range resp.Results {
			if res.Error != "" {
				return created, fmt.Errorf("backlog submission refused: %s", res.Error)
			}
			created += len(res.Ids)
		}
	}
	return created, nil
}
