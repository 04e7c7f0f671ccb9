package server

import (
	"context"
	"net"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// joinable refuses to add a member that cannot be reached: a voter nobody
// can reach still counts towards the majority, so two made-up members
// added to a three-member quorum leave it unable to elect a leader. The
// member's Raft address (and API address, when given) must accept a TCP
// connection from the leader now.
func (s *Server) joinable(ctx context.Context, req *latticev1.QuorumJoinRequest) error {
	if s.cfg.InMemRaft {
		return nil // a single in-process member: nothing can join over TCP
	}
	check := []struct{ what, addr string }{{"raft address", req.RaftAddr}, {"API address", req.ApiAddr}}
	for _, c := range check {
		if c.addr == "" {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", c.addr)
		cancel()
		if err != nil {
			s.log.Warn("refused to add an unreachable member", "id", req.Id, "addr", c.addr, "err", err)
			return failedPrecondition("member %s is unreachable at its %s %s (%v): a voter that cannot be reached counts against the majority; start it first, then add it", req.Id, c.what, c.addr, err)
		}
		conn.Close()
	}
	return nil
}
