package checkpoint

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Proactive returns the ids of the jobs to checkpoint now: those Evaluate
// says yes to, best Value − Cost first, ties by id (ascending), at most limit
// of them (limit <= 0 = no limit). jobs is not modified. The broker calls it
// once per cycle with the Candidate allocations of the whole system.
func Proactive(p Params, jobs []Job, s Situation, limit int) []uint64 {
	type pick struct {
		id     uint64
		margin float64
	}
	var picks []pick
	for _, j := range jobs {
		if d := Evaluate(p, j, s); d.Checkpoint {
			picks = append(picks, pick{j.ID, d.Value - d.Cost})
		}
	}
	slices.SortStableFunc(picks, func(a, b pick) int {
		if c := cmp.Compare(b.margin, a.margin); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	if limit > 0 && len(picks) > limit {
		picks = picks[:limit]
	}
	ids := make([]uint64, len(picks))
	for i, pk := range picks {
		ids[i] = pk.id
	}
	return ids
}

// SignalDue reports whether Slurm's --signal=SIG@secs lead-time signal is
// due for j at now: secs > 0, the job has started, and now >= Start +
// Walltime − secs (at once when secs is at least the walltime). It stays
// true until the job ends: the broker sends the signal once per run, and
// remembers it by (id, Start), so a requeued job gets it again in its next
// run. It is false when the walltime is not positive.
func SignalDue(j Job, secs int, now time.Time) bool {
	if secs <= 0 || j.Walltime <= 0 || !started(j, now) {
		return false
	}
	lead := j.Walltime
	if int64(secs) < int64(j.Walltime/time.Second) {
		lead = time.Duration(secs) * time.Second
	}
	return !now.Before(j.Start.Add(j.Walltime - lead))
}

// PreemptionCost is what stopping j now would cost, in node-hours, so that
// the victims of a reclaim or a preemption can be ordered cheapest first:
//
//   - Lost work. A checkpointable job pays the cheaper of checkpointing
//     first (WriteTime + ComputeWaste + StorageCost of Evaluate; the
//     checkpoint then saves all its work) and being stopped without one
//     (its work at risk, less than a write for a job that has just started
//     or just checkpointed). A job that cannot checkpoint loses everything
//     since its start: elapsed hours × nodes.
//   - End proximity: nodes · window · exp(−R/window) for R walltime left
//     and window = p.EndProximityWindow. A job close to its end frees its
//     nodes soon anyway: preempting it gains the preemptor little over
//     waiting while the victim still pays a requeue, a restart and a
//     second queue wait. The term grows as R shrinks (nodes · window at the
//     end, 37% of that one window before it), so among victims that lose
//     alike the one with the most walltime left goes first.
//
// A job that has not started costs nothing. The result is finite and >= 0
// for valid p.
func PreemptionCost(p Params, j Job, now time.Time) float64 {
	if !started(j, now) {
		return 0
	}
	nodes := float64(max(j.Nodes, 0))
	var lost float64
	if j.Mode.Checkpointable() {
		writeH := CheckpointWriteTime(p, j).Hours()
		write := writeH*nodes*(1+p.ComputeWasteFraction) + p.StorageCostNodeHours*nodes
		lost = min(write, workAtRisk(j, now, nodes))
	} else {
		lost = now.Sub(j.Start).Hours() * nodes
	}
	return lost + endProximity(p, j, now, nodes)
}

// endProximity is PreemptionCost's end-of-walltime term.
func endProximity(p Params, j Job, now time.Time, nodes float64) float64 {
	window := p.EndProximityWindow
	if window <= 0 || j.Walltime <= 0 {
		return 0
	}
	left := max(remaining(j, now), 0)
	return nodes * window.Hours() * math.Exp(-float64(left)/float64(window))
}
