package server

import (
	"fmt"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/rpc/convert"
)

// explainRunning fills the explanation of an active allocation: when it
// started, its walltime and what is left of it, and — when this leader's
// loop started it — the score it started with, factor by factor, its rank,
// and how its nodes were chosen (vcluster.Explanations.Started).
func (a *allocService) explainRunning(al *model.Allocation, out *latticev1.Explanation) {
	now := a.s.cfg.Clock()
	msg := fmt.Sprintf("%s on %d node(s) %s", statePhrase(al.State), len(al.Nodes), model.CompressHostlist(al.Nodes))
	if !al.StartTime.IsZero() {
		out.StartUnixMs = convert.UnixMS(al.StartTime)
		run := now.Sub(al.StartTime) - al.SuspendedFor
		if !al.SuspendedAt.IsZero() {
			run -= now.Sub(al.SuspendedAt)
		}
		run = max(run, 0)
		msg += fmt.Sprintf(" since %s (%s ago)", al.StartTime.UTC().Format(time.RFC3339), model.FormatWalltime(now.Sub(al.StartTime)))
		if al.Walltime > 0 {
			left := max(al.Walltime-run, 0)
			out.WalltimeSeconds, out.WalltimeLeftSeconds = int64(al.Walltime/time.Second), int64(left/time.Second)
			msg += fmt.Sprintf("; %s of its %s walltime left", model.FormatWalltime(left), model.FormatWalltime(al.Walltime))
		}
	}
	if al.Reservation != "" {
		out.Reservation = al.Reservation
		msg += fmt.Sprintf("; in reservation %s", al.Reservation)
	}
	var started bool
	if l := a.s.currentLeader(); l != nil {
		if loop := l.Scheduler(al.VCluster); loop != nil {
			if e, ok := loop.Explanations.Started(al.ID); ok {
				started = true
				p := explanationToProto(al.DisplayID(), al.State, e)
				out.Score, out.Factors, out.Filtered = p.Score, p.Factors, p.Filtered
				out.WeightsProfile, out.QueuePosition, out.ComputedUnixMs = p.WeightsProfile, p.QueuePosition, p.ComputedUnixMs
				msg += "; it " + e.Message + " (the factors below are its score when it started)"
			}
		}
	}
	if !started {
		msg += "; how it was placed is not known here (it started before this leader's term, or long ago)"
	}
	out.Message = msg
}

func statePhrase(s model.AllocState) string {
	switch s {
	case model.StateRunning:
		return "runs"
	case model.StateSuspended:
		return "is suspended"
	case model.StateCheckpointing:
		return "checkpoints"
	}
	return "is " + string(s)
}
