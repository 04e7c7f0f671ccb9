package server

import (
	"context"
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
// as soon as every member of the Raft configuration knows the command (an
// older member would stop at an entry it cannot decode); the leader
// presents it to every agent in the header of its stream
// (agent.ClusterIDHeader), and agents refuse a server of another cluster.

// clusterIDRetry is how often a leader retries naming the cluster while a
// member does not know the command yet (or cannot be asked).
var clusterIDRetry = 10 * time.Second

// nameCluster is a leader loop: it mints and commits the cluster id when
// the cluster has none, then ends.
func (l *leaderState) nameCluster(ctx context.Context) {
	s := l.s
	waiting := ""
	for {
		if s.clusterID() != "" {
			return
		}
		why := s.everyMemberKnowsClusterID(ctx)
		if why == "" {
			if err := s.mintClusterID(ctx); err != nil {
				s.log.Warn("naming the cluster failed; retrying", "err", err)
			}
		} else if why != waiting {
			waiting = why
			s.log.Info("the cluster gets its id once every member knows it", "waiting_for", why)
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
	id, err := quorum.NewClusterID()
	if err != nil {
		return err
	}
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

// everyMemberKnowsClusterID asks every other member of the configuration
// whether its log schema has the cluster id command; "" when all do, else
// which member does not (or could not be asked).
func (s *Server) everyMemberKnowsClusterID(ctx context.Context) string {
	servers, err := s.q.Servers()
	if err != nil {
		return "the Raft configuration: " + err.Error()
	}
	addrs := map[string]string{}
	s.view(func(st *quorum.State) {
		for _, m := range st.Members() {
			addrs[m.ID] = m.APIAddr
		}
	})
	for _, srv := range servers {
		if srv.ID == s.cfg.ID {
			continue
		}
		if addrs[srv.ID] == "" {
			return fmt.Sprintf("member %s (no API address published)", srv.ID)
		}
		if ok, err := s.memberKnowsClusterID(ctx, addrs[srv.ID]); err != nil {
			return fmt.Sprintf("member %s (%v)", srv.ID, err)
		} else if !ok {
			return fmt.Sprintf("member %s (an older release)", srv.ID)
		}
	}
	return ""
}

func (s *Server) memberKnowsClusterID(ctx context.Context, addr string) (bool, error) {
	cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(s.memberContext(ctx), selfOnlyKey, "1"), 3*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(addr, s.dialCreds())
	if err != nil {
		return false, err
	}
	defer conn.Close()
	r, err := latticev1.NewAdminServiceClient(conn).QuorumStatus(cctx, &latticev1.QuorumStatusRequest{})
	if err != nil {
		return false, err
	}
	return len(r.Members) == 1 && r.Members[0].KnowsClusterId, nil
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
