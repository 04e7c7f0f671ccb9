package server

import (
	"context"
	"time"

	"github.com/latticehpc/lattice/leader"
	"github.com/latticehpc/lattice/model"
)

// holderOf is who is calling: the hello's agent id and instance, and the
// credential's user ("" with auth off).
func holderOf(ctx context.Context, agentID, instance string) leader.Holder {
	h := leader.Holder{Agent: agentID, Instance: instance, Since: time.Now()}
	if id := caller(ctx); id != nil {
		h.User = id.User
	}
	return h
}

// refuseClaim logs a refused hello (the agent sees the error) and returns it.
func (s *Server) refuseClaim(who leader.Holder, verb string, err error) error {
	s.log.Warn("refused an agent claiming a node another connected agent holds", "action", verb,
		"agent", model.Clip(who.Agent, model.MaxQuotedBytes), "user", who.User, "err", err)
	return err
}
