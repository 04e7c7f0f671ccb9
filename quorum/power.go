package quorum

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
)

// checkPower enforces I3 for the system budget and the vCluster's cap
// with the power package's draw model.
func checkPower(s *State, ctx *assignCtx) *Rejection {
	sysDelta, vcDelta := power.StartDeltaAll(ctx.nodes, ctx.vc.Name)
	if e := power.Check("system", s.idx.drawWatts, sysDelta, s.PowerBudgetWatts); e != nil {
		return reject(CodePower, model.ReasonPowerBudget, "estimated draw %d W + %d W exceeds the system budget %d W", e.Draw, e.Delta, e.Limit)
	}
	if e := power.Check("vcluster", s.idx.vclusterDraw[ctx.vc.Name], vcDelta, ctx.vc.PowerCapWatts); e != nil {
		return reject(CodePower, model.ReasonPowerBudget, "vcluster %s draw %d W + %d W exceeds its cap %d W", ctx.vc.Name, e.Draw, e.Delta, e.Limit)
	}
	return nil
}
