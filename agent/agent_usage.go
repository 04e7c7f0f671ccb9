package agent

import (
	"path/filepath"
	"strconv"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// proto is the report's form of u (nil stays nil).
func (u *Usage) proto() *latticev1.JobUsage {
	if u == nil {
		return nil
	}
	return &latticev1.JobUsage{UserCpuSeconds: u.UserSec, SystemCpuSeconds: u.SystemSec, MaxRssBytes: u.MaxRSS,
		MaxRssSampled: u.MaxRSSSampled, ConsumedEnergyJoules: u.EnergyJoules, EnergySource: u.EnergySource, OomKills: u.OOMKills}
}

func usageOfProto(p *latticev1.JobUsage) *Usage {
	if p == nil {
		return nil
	}
	return &Usage{UserSec: p.UserCpuSeconds, SystemSec: p.SystemCpuSeconds, MaxRSS: p.MaxRssBytes, MaxRSSSampled: p.MaxRssSampled,
		EnergyJoules: p.ConsumedEnergyJoules, EnergySource: p.EnergySource, OOMKills: p.OomKills}
}

// limitLaunch sets a launch's memory limit (--mem, --mem-per-cpu x the
// node's CPUs) and the node's busy draw (the energy estimate).
func (a *Agent) limitLaunch(l *Launch, req *latticev1.AllocationRequest, node string) {
	for i := range a.cfg.Nodes {
		n := &a.cfg.Nodes[i]
		if n.Name != node {
			continue
		}
		l.BusyWatts = n.BusyWatts
		mb := req.GetMemPerNodeMb()
		if per := req.GetMemPerCpuMb(); per > 0 && n.CPUs > 0 {
			mb = max(mb, per*int64(n.CPUs))
		}
		l.MemLimitBytes = mb << 20
	}
	if l.MemLimitBytes > 0 && (a.runner.cg == nil || !a.runner.cg.canLimitMemory()) {
		a.log.Warn("the job asks for a memory limit this node cannot enforce (no memory cgroup)", "alloc", l.AllocID, "limit_bytes", l.MemLimitBytes)
	}
}

// liveUsage answers the leader's question about a running allocation.
func (a *Agent) liveUsage(q *latticev1.UsageQuery) *latticev1.UsageAnswer {
	u, ok := a.runner.LiveUsage(q.AllocationId)
	if !ok {
		return &latticev1.UsageAnswer{RequestId: q.RequestId, NotRunning: true}
	}
	return &latticev1.UsageAnswer{RequestId: q.RequestId, Usage: u.proto()}
}

// freeze suspends or resumes a running allocation (latticectl
// suspend/resume): its walltime does not run while it is frozen.
func (a *Agent) freeze(f *latticev1.FreezeAllocation) {
	if err := a.runner.Freeze(f.AllocationId, f.Freeze); err != nil {
		a.log.Warn("freeze", "alloc", f.AllocationId, "freeze", f.Freeze, "err", err)
		return
	}
	a.log.Info("allocation frozen", "alloc", f.AllocationId, "frozen", f.Freeze)
	if f.Freeze {
		a.startUnblocked() // a launch waiting for its nodes may start beside it
	}
}

// energyCounter reads the node's RAPL energy (µJ, the packages summed)
// for the runs' usage; nil without a meter.
func (p *PowerMeter) energyCounter() func() (uint64, bool) {
	if p == nil {
		return nil
	}
	return func() (uint64, bool) {
		var sum uint64
		ds := p.domains()
		for _, d := range ds {
			v, err := strconv.ParseUint(readTrim("", filepath.Join(d, "energy_uj")), 10, 64)
			if err != nil {
				return 0, false
			}
			sum += v
		}
		return sum, len(ds) > 0
	}
}
