package rpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/latticehpc/lattice/admission"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/quorum"
)

// Member is what the handlers need of the quorum member they serve.
type Member interface {
	// Propose stamps the command's time (when unset) and proposes it
	// (the forwarding interceptor made sure this member leads).
	Propose(ctx context.Context, c quorum.Command) (*quorum.Result, error)
	// View gives read access to committed state.
	View(fn func(*quorum.State))
	// Now is the member's clock for the times it mints.
	Now() time.Time
	Log() *slog.Logger
	// AuthOn reports whether calls are authenticated (then every call
	// carries an identity: auth.FromContext).
	AuthOn() bool
	// Admission is the chain submissions and updates pass.
	Admission() *admission.Chain
}

// Caller is the identity of a call; nil with auth off.
func Caller(ctx context.Context) *auth.Identity { return auth.FromContext(ctx) }

// CanRead applies auth.CanRead when auth is on.
func CanRead(m Member, ctx context.Context, verb string, o auth.Object) error {
	if !m.AuthOn() {
		return nil
	}
	return Deny(auth.CanRead(Caller(ctx), verb, o))
}

// CanChange applies auth.CanChange when auth is on.
func CanChange(m Member, ctx context.Context, verb string, o auth.Object) error {
	if !m.AuthOn() {
		return nil
	}
	return Deny(auth.CanChange(Caller(ctx), verb, o))
}
