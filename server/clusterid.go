package server

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// The cluster id (quorum/clusterid.go): a leader names the cluster once
// (leader/clusterid.go, a loop of the term); the member presents it to
// every agent in the header of its stream
// (agent.ClusterIDHeader), and agents refuse a server of another cluster.

func (s *Server) clusterID() string {
	var id string
	s.view(func(st *quorum.State) { id = st.ClusterID() })
	return id
}

// presentClusterID puts the cluster id in the header of an agent's stream
// (sent with the first message), when the cluster has one.
func (s *Server) presentClusterID(stream grpc.ServerStream) {
	if id := s.clusterID(); id != "" {
		_ = stream.SetHeader(metadata.Pairs(agent.ClusterIDHeader, id))
	}
}

// sameCluster refuses the hello of an agent that serves another cluster,
// before anything of it is registered.
func (s *Server) sameCluster(hello *latticev1.AgentHello) error {
	if id := s.clusterID(); hello.ClusterId != "" && id != "" && hello.ClusterId != id {
		s.log.Warn("refused an agent of another cluster", "agent", hello.AgentId, "agent_cluster_id", hello.ClusterId, "cluster_id", id)
		// Not PermissionDenied: the agent's credential is not in question
		// (an agent gives up after refusals of its credential).
		return status.Errorf(codes.FailedPrecondition, "%s %s; agent %s serves cluster %s", agent.OtherClusterMessage, id, hello.AgentId, hello.ClusterId)
	}
	return nil
}
