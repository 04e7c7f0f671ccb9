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

// keepsMajority refuses a membership change after which the voters this
// leader can reach (itself, and those whose Raft address accepts a TCP
// connection now) are no majority: such a configuration cannot elect a
// leader or commit anything until members come back. remove names the
// member taken out ("" for none); add the raft address of one added (it was
// checked reachable).
func (s *Server) keepsMajority(ctx context.Context, remove, add string) error {
	if s.cfg.InMemRaft {
		return nil
	}
	servers, err := s.q.Servers()
	if err != nil {
		return rpcError(err)
	}
	voters, reachable := 0, 0
	var down []string
	for _, srv := range servers {
		if !srv.Voter || srv.ID == remove || srv.RaftAddr == add {
			continue
		}
		voters++
		if srv.ID == s.cfg.ID || dialable(ctx, srv.RaftAddr) {
			reachable++
		} else {
			down = append(down, srv.ID)
		}
	}
	if add != "" {
		voters++
		reachable++
	}
	if reachable*2 > voters {
		return nil
	}
	what := "adding a member"
	if remove != "" {
		what = "removing " + remove
	}
	s.log.Warn("refused a membership change that leaves no reachable majority", "change", what, "voters", voters, "reachable", reachable, "unreachable", down)
	return failedPrecondition("%s would leave %d voters of which only %d are reachable (unreachable: %v), no majority: bring members back or remove an unreachable one first",
		what, voters, reachable, down)
}

func dialable(ctx context.Context, addr string) bool {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
