package server

import (
	"context"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// joinLoop asks the listed members to add this one as a voter until one
// (the leader, or a follower forwarding to it) accepts. A member that is
// already in the configuration is accepted again harmlessly.
func (s *Server) joinLoop(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for attempt := 0; ; attempt++ {
		addr := s.cfg.Join[attempt%len(s.cfg.Join)]
		err := s.askToJoin(ctx, addr)
		if err == nil {
			s.log.Info("joined the quorum", "via", addr)
			return
		}
		if attempt%len(s.cfg.Join) == len(s.cfg.Join)-1 {
			s.log.Info("join not accepted yet; retrying", "via", addr, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 3*time.Second)
	}
}

func (s *Server) askToJoin(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, s.dialCreds())
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(s.memberContext(ctx), 15*time.Second)
	defer cancel()
	_, err = latticev1.NewAdminServiceClient(conn).QuorumJoin(cctx, &latticev1.QuorumJoinRequest{
		Id: s.cfg.ID, RaftAddr: s.q.RaftAddr(), ApiAddr: s.APIAddr(),
	})
	return err
}
