package server

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/vcluster"
)

// powerSnapshot fills a scheduling snapshot's power view: the headroom under
// the system budget and the vCluster's cap (power.Headroom), and the
// site's price schedule with its shifting rule (f7 and EnergyPrice holds).
func (s *Server) powerSnapshot(st *quorum.State, vc *model.VCluster, snap *vcluster.Snapshot) {
	snap.PowerHeadroomWatts = power.MinHeadroom(
		power.Headroom(st.PowerBudgetWatts, st.DrawWatts()),
		power.Headroom(vc.PowerCapWatts, st.VClusterDrawWatts(vc.Name)))
	snap.Energy = s.cfg.Energy
}
