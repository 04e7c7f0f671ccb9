package server

import (
	"context"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// vclusterCommand is what `vcluster set` proposes. A creation proposes the
// whole definition (SetVCluster); a change proposes only the fields it
// changes (PatchVCluster), so a member never drops a field it was not
// asked to change. While some member does not know patches yet (a rolling
// upgrade), a change proposes the whole definition as before, provided
// that member knows every field the definition sets; otherwise the change
// is refused, naming the member and the level it needs.
func (s *Server) vclusterCommand(ctx context.Context, requestID string, exists bool, before, after model.VCluster) (quorum.Command, error) {
	h := quorum.Header{RequestID: requestID}
	if !exists {
		return &quorum.SetVCluster{Header: h, VCluster: after}, nil // gated by propose (quorum.SetVCluster.Level)
	}
	set, err := quorum.VClusterChanges(before, after)
	if err != nil {
		return nil, err
	}
	patch := &quorum.PatchVCluster{Header: h, Name: after.Name, Set: set}
	low, err := s.q.ClusterLevel(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case low.Level >= patch.Level():
		return patch, nil
	case quorum.VClusterLevel(after) <= low.Level:
		return &quorum.SetVCluster{Header: h, VCluster: after}, nil
	}
	return nil, &quorum.LevelError{What: "vcluster set " + after.Name, Need: patch.Level(), Member: low}
}
