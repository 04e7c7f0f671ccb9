package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/latticehpc/lattice/admission"
	"github.com/latticehpc/lattice/quorum"
)

// rpcMember is this member as package rpc's handlers see it (rpc.Member).
type rpcMember struct{ s *Server }

func (m rpcMember) Propose(ctx context.Context, c quorum.Command) (*quorum.Result, error) {
	return m.s.propose(ctx, c)
}
func (m rpcMember) View(fn func(*quorum.State)) { m.s.view(fn) }
func (m rpcMember) Now() time.Time              { return m.s.cfg.Clock() }
func (m rpcMember) Log() *slog.Logger           { return m.s.log }
func (m rpcMember) AuthOn() bool                { return m.s.authOn() }
func (m rpcMember) Admission() *admission.Chain { return m.s.admit }
