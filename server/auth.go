package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/auth"
)

// Authentication and authorization (auth/ holds the rules; this file wires
// them). With Config.TokensFile set, every call but the gRPC health checks
// must carry a bearer token from that file; the interceptors check it and
// the method's rule before the forwarder or any handler runs, and handlers
// apply the object rules (whose allocation, which tenant). A follower
// forwards the caller's token unchanged and the leader checks it again, so
// every member must have the same tokens file (copy it like a munge key);
// a member's own calls to other members (join, health, quorum status) carry
// its Config.Token.

type identityKey struct{}

// authenticator holds the tokens file and reloads it when it changes.
type authenticator struct {
	path  string
	extra map[string]auth.Identity
	log   *slog.Logger

	mu     sync.RWMutex
	tokens *auth.Tokens
	stamp  string // size and modification time of the file last read
}

func newAuthenticator(path string, extra map[string]auth.Identity, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{path: path, extra: extra, log: log}
	changed, err := a.reload()
	if err != nil {
		return nil, err
	}
	if !changed {
		a.install(&auth.Tokens{})
	}
	return a, nil
}

// reload reads the tokens file if it changed since last read. A missing
// file means no tokens (only Config.ExtraTokens work); a bad file keeps
// the previous tokens.
func (a *authenticator) reload() (bool, error) {
	fi, err := os.Stat(a.path)
	if errors.Is(err, os.ErrNotExist) {
		if a.stamp != "missing" {
			a.stamp = "missing"
			a.install(&auth.Tokens{})
			return true, nil
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("tokens file %s: %w", a.path, err)
	}
	stamp := fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
	if stamp == a.stamp {
		return false, nil
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		return false, fmt.Errorf("tokens file %s: %w", a.path, err)
	}
	t, err := auth.ParseTokens(bytes.NewReader(b))
	if err != nil {
		return false, fmt.Errorf("tokens file %s: %w", a.path, err)
	}
	a.stamp = stamp
	a.install(t)
	return true, nil
}

func (a *authenticator) install(t *auth.Tokens) {
	for tok, id := range a.extra {
		t.Add(tok, id)
	}
	a.mu.Lock()
	a.tokens = t
	a.mu.Unlock()
}

// watch reloads the file every second until ctx ends.
func (a *authenticator) watch(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			changed, err := a.reload()
			if err != nil {
				a.log.Error("tokens file not reloaded; the previous tokens stay in force", "err", err)
			} else if changed {
				a.mu.RLock()
				n := a.tokens.Len()
				a.mu.RUnlock()
				a.log.Info("tokens file reloaded", "path", a.path, "tokens", n)
			}
		}
	}
}

func (a *authenticator) authenticate(token string) *auth.Identity {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.tokens.Authenticate(token)
}

// bearer extracts the token of an "authorization: Bearer TOKEN" header.
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// check authenticates and authorizes one call; it returns the context the
// handler gets.
func (a *authenticator) check(ctx context.Context, method string) (context.Context, error) {
	if access, ok := auth.Rules[method]; ok && access == auth.Public {
		return ctx, nil
	}
	tok := bearer(ctx)
	if tok == "" {
		return nil, status.Errorf(codes.Unauthenticated,
			"%s refused: no credential; send a bearer token (latticectl --token or LATTICE_TOKEN; `latticed token create` makes one)", shortMethod(method))
	}
	id := a.authenticate(tok)
	if id == nil {
		a.log.Warn("refused an unknown token", "method", method)
		return nil, status.Errorf(codes.Unauthenticated, "%s refused: the token is not in this member's tokens file (revoked, mistyped, or made for another cluster)", shortMethod(method))
	}
	if err := auth.Authorize(method, id); err != nil {
		a.log.Warn("refused a call", "user", id.User, "role", id.Role, "method", method)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

func shortMethod(m string) string {
	return strings.TrimPrefix(strings.TrimPrefix(m, "/"), "lattice.v1.")
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.check(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.check(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

// authOn reports whether calls are authenticated.
func (s *Server) authOn() bool { return s.auth != nil }

// caller is the identity of a call; nil with auth off.
func caller(ctx context.Context) *auth.Identity {
	id, _ := ctx.Value(identityKey{}).(*auth.Identity)
	return id
}

// deny maps an object rule's refusal to PermissionDenied (nil stays nil).
func deny(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// canRead applies auth.CanRead when auth is on.
func (s *Server) canRead(ctx context.Context, verb string, o auth.Object) error {
	if !s.authOn() {
		return nil
	}
	return deny(auth.CanRead(caller(ctx), verb, o))
}

// canChange applies auth.CanChange when auth is on.
func (s *Server) canChange(ctx context.Context, verb string, o auth.Object) error {
	if !s.authOn() {
		return nil
	}
	return deny(auth.CanChange(caller(ctx), verb, o))
}

// memberContext adds this member's own credential to an outgoing call to
// another member.
func (s *Server) memberContext(ctx context.Context) context.Context {
	if s.cfg.Token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.cfg.Token)
}

// audit logs one line per state-changing call on the member that received
// it from the client: who, what, result.
func (s *Server) audit(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if !readOnlyMethods[info.FullMethod] && !forwarded(ctx) {
		who := "anonymous (auth off)"
		if id := caller(ctx); id != nil {
			who = id.User
		}
		s.log.Info("audit", "user", who, "method", shortMethod(info.FullMethod), "result", status.Code(err).String())
	}
	return resp, err
}

// readOnlyMethods are left out of the audit log.
var readOnlyMethods = map[string]bool{
	"/grpc.health.v1.Health/Check":           true,
	"/grpc.health.v1.Health/List":            true,
	"/lattice.v1.AllocationService/Get":      true,
	"/lattice.v1.AllocationService/List":     true,
	"/lattice.v1.AllocationService/Explain":  true,
	"/lattice.v1.DAGService/GetDAG":          true,
	"/lattice.v1.DAGService/ListDAGs":        true,
	"/lattice.v1.NodeService/List":           true,
	"/lattice.v1.NodeService/Heartbeat":      true,
	"/lattice.v1.AdminService/QuorumStatus":  true,
	"/lattice.v1.AdminService/ListVClusters": true,
	"/lattice.v1.AdminService/GetPower":      true,
	"/lattice.v1.AdminService/ListTenants":   true,
}
