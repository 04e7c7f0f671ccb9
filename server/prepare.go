package server

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// prepareRequest makes a submitted request what its entry will say, before
// it is checked and proposed: its vCluster resolved (a partition name, or
// the default vCluster when it names none) and the defaults of this
// release applied. The entry is proposed Prepared: Apply takes the request
// as it is (quorum.Submit), so a default or rule changed by a later
// release never changes how this entry applies.
func (s *Server) prepareRequest(r *model.Request) {
	s.view(func(st *quorum.State) { r.VCluster = st.ResolveDefaultVCluster(r.VCluster) })
	r.ApplyDefaults()
}
