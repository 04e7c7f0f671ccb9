package replay

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// A service load (docs/services.md, docs/replay.md): a time series of how
// many instances a service wants, added to a trace as the instances' runs,
// so a replay shows what a service costs the batch queue. Instance k (1,
// 2, …) runs, one node, from each time the series reaches k until it
// drops below k again: one job per such interval, of class
// ServiceLoadClass, submitted when it starts. The metrics (waits,
// slowdowns, fairness, utilization) count only the trace's own jobs;
// Metrics.ServiceNodeHours is what the instances ran.

// ServicePoint is one step of a service load: from At on, Count instances.
type ServicePoint struct {
	At    time.Duration
	Count int
}

// ServiceLoadClass is the priority class of a service load's instances.
const ServiceLoadClass = 8

// ReadServiceLoad reads a service load: one "SECONDS COUNT" pair per line
// (seconds from trace time 0, non-decreasing; blank lines and # comments
// skipped).
func ReadServiceLoad(r io.Reader) ([]ServicePoint, error) {
	var pts []ServicePoint
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(strings.ReplaceAll(text, ",", " "))
		if len(f) == 0 {
			continue
		}
		bad := func(what string) error {
			return &SyntaxError{Line: line, Msg: fmt.Sprintf("service load: %s in %q: allowed SECONDS COUNT, seconds non-decreasing, count >= 0", what, strings.TrimSpace(text))}
		}
		if len(f) != 2 {
			return nil, bad("two fields expected")
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil || sec < 0 {
			return nil, bad("bad SECONDS")
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return nil, bad("bad COUNT")
		}
		at := time.Duration(sec * float64(time.Second))
		if k := len(pts); k > 0 && at < pts[k-1].At {
			return nil, bad("time goes back")
		}
		pts = append(pts, ServicePoint{At: at, Count: n})
	}
	return pts, sc.Err()
}

// ReadServiceLoadFile is ReadServiceLoad of a file.
func ReadServiceLoadFile(path string) ([]ServicePoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadServiceLoad(f)
}

// WithServiceLoad returns a copy of tr with the instances of a service load
// added as jobs of vcluster ("" = the first), the load's last step lasting
// until end (0: until the trace's last submit).
func (tr *Trace) WithServiceLoad(pts []ServicePoint, vcluster string, end time.Duration) (*Trace, error) {
	if len(pts) == 0 {
		return tr, nil
	}
	if end <= 0 {
		for _, j := range tr.Jobs {
			end = max(end, j.Submit)
		}
	}
	end = max(end, pts[len(pts)-1].At)
	nodes := tr.Capacity
	for _, v := range tr.VClusters {
		if v.Name == vcluster {
			nodes = v.Nodes
		}
	}
	peak := 0
	for _, p := range pts {
		peak = max(peak, p.Count)
	}
	if peak > nodes {
		return nil, fmt.Errorf("service load: %d instances at its peak, more than the %d nodes of its vcluster", peak, nodes)
	}
	var id uint64
	for _, j := range tr.Jobs {
		id = max(id, j.ID)
	}
	out := *tr
	out.Jobs = slices.Clone(tr.Jobs)
	for k := 1; k <= peak; k++ {
		var since time.Duration
		up := false
		emit := func(to time.Duration) {
			if to > since {
				id++
				out.Jobs = append(out.Jobs, Job{ID: id, Submit: since, Runtime: to - since, Estimate: to - since, Size: 1,
					Tenant: "service", VCluster: vcluster, PriorityClass: ServiceLoadClass, Checkpoint: model.CheckpointNone, Service: true})
			}
		}
		for _, p := range pts {
			switch {
			case p.Count >= k && !up:
				up, since = true, p.At
			case p.Count < k && up:
				up = false
				emit(p.At)
			}
		}
		if up {
			emit(end)
		}
	}
	slices.SortStableFunc(out.Jobs, func(a, b Job) int { return cmp.Or(cmp.Compare(a.Submit, b.Submit), cmp.Compare(a.ID, b.ID)) })
	return &out, nil
}
