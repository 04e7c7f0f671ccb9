package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/quorum"
)

// The cluster id (quorum/clusterid.go): a leader names the cluster once,
// as soon as every member knows the command (Propose refuses it while a
// member of an older release remains); the leader
// presents it to every agent in the header of its stream
// (agent.ClusterIDHeader), and agents refuse a server of another cluster.

// clusterIDRetry is how often a leader retries naming the cluster while a
// member does not know the command yet (or cannot be asked).
var clusterIDRetry = 10 * time.Second

// nameCluster is a leader loop: it mints and commits the cluster id when
// the cluster has none, then ends. While a member of an older release
// remains, the proposal is refused (the command's level): it retries.
func (s *Server) nameCluster(ctx context.Context) {
	waiting := ""
	for s.clusterID() == "" {
		if err := s.mintClusterID(ctx); err == nil {
			return
		} else if err.Error() != waiting {
			waiting = err.Error()
			s.log.Info("the cluster gets its id once every member knows it; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(clusterIDRetry):
		}
	}
}

func (s *Server) clusterID() string {
	var id string
	s.view(func(st *quorum.State) { id = st.ClusterID() })
	return id
}

func (s *Server) mintClusterID(ctx context.Context) error {
	b := make([]byte, quorum.ClusterIDLength/2) // minted before the proposal: Apply draws nothing
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("mint a cluster id: %w", err)
	}
	id := hex.EncodeToString(b)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := s.propose(pctx, &quorum.SetClusterID{ID: id})
	if err != nil {
		return err
	}
	if r.Rejection != nil && r.Rejection.Code != quorum.CodeConflict {
		return rejectionError(r.Rejection)
	}
	s.log.Info("the cluster is named; agents check it on every connection", "cluster_id", s.clusterID())
	return nil
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
