package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/rpc/rest"
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

	// sessions are the dashboard's (http_api.go); memberToken is what a
	// follower presents when it forwards a session's call.
	sessions    *rest.Sessions
	memberToken string
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
	var id *auth.Identity
	certCN := ""
	switch {
	case tok != "":
		id = a.authenticate(tok)
		if id == nil && strings.HasPrefix(tok, rest.SessionPrefix) {
			return a.checkSession(ctx, method, tok)
		}
		if id == nil {
			a.log.Warn("refused an unknown token", "method", method)
			return nil, status.Errorf(codes.Unauthenticated, "%s refused: the token is not in this member's tokens file (revoked, mistyped, or made for another cluster)", shortMethod(method))
		}
	default:
		leaf := peerCert(ctx)
		if leaf == nil {
			a.log.Warn("refused a call without a credential", "method", method)
			return nil, status.Errorf(codes.Unauthenticated,
				"%s refused: no credential; send a bearer token (latticectl --token or LATTICE_TOKEN; `latticed token create` makes one) or a client certificate (--cert/--key)", shortMethod(method))
		}
		var err error
		if id, certCN, err = a.certIdentity(ctx, leaf); err != nil {
			a.log.Warn("refused a client certificate", "cn", leaf.Subject.CommonName, "method", method)
			return nil, status.Errorf(codes.Unauthenticated, "%s refused: %v", shortMethod(method), err)
		}
	}
	id = onBehalfOf(ctx, id)
	if err := auth.Authorize(method, id); err != nil {
		a.log.Warn("refused a call", "user", id.User, "role", id.Role, "method", method)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	ctx = context.WithValue(ctx, identityKey{}, id)
	if certCN != "" {
		ctx = context.WithValue(ctx, certCNKey{}, certCN)
	}
	return ctx, nil
}

// forwardedCNKey carries, from a follower to the leader, the common name
// of the client certificate the follower authenticated a call by. The
// leader believes it only from a peer presenting a member certificate; a
// follower never passes on a client's own value (forwardContext).
const forwardedCNKey = "x-lattice-cn"

type certCNKey struct{}

// peerCert is the verified client certificate of a call over TLS, or nil.
func peerCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0]
}

// certIdentity maps a verified client certificate to an identity: its
// common name through the tokens file's cn: entries. A quorum member's
// certificate is a member identity (admin: a member holds the whole state
// anyway), or, on a call it forwards, stands for the common name it names.
// It returns the common name to forward ("" for a member's own call).
func (a *authenticator) certIdentity(ctx context.Context, leaf *x509.Certificate) (*auth.Identity, string, error) {
	cn := leaf.Subject.CommonName
	if pki.IsMember(leaf) {
		md, _ := metadata.FromIncomingContext(ctx)
		fwd := md.Get(forwardedCNKey)
		if len(fwd) == 0 {
			return &auth.Identity{User: "member:" + cn, Role: auth.RoleAdmin, MaxPriority: -1}, "", nil
		}
		cn = fwd[0]
	}
	a.mu.RLock()
	id := a.tokens.AuthenticateCN(cn)
	a.mu.RUnlock()
	if id == nil {
		return nil, "", fmt.Errorf("the client certificate %q is not in this member's tokens file (add it with `latticed token create --cn %s`)", cn, cn)
	}
	return id, cn, nil
}

func shortMethod(m string) string {
	return strings.TrimPrefix(strings.TrimPrefix(m, "/"), "lattice.v1.")
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	cctx, err := a.check(ctx, info.FullMethod)
	if err != nil {
		if !readOnlyMethods[info.FullMethod] {
			a.auditRefused(ctx, info.FullMethod, req, err)
		}
		return nil, err
	}
	ctx = cctx
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
		if auditedStreams[info.FullMethod] {
			a.auditRefused(ss.Context(), info.FullMethod, nil, err)
		}
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
	if !readOnlyMethods[info.FullMethod] {
		s.auditLine(ctx, info.FullMethod, req, err)
	}
	return resp, err
}

// readOnlyMethods are left out of the audit log.
var readOnlyMethods = map[string]bool{
	"/grpc.health.v1.Health/Check":              true,
	"/grpc.health.v1.Health/List":               true,
	"/lattice.v1.AllocationService/Get":         true,
	"/lattice.v1.AllocationService/List":        true,
	"/lattice.v1.AllocationService/Explain":     true,
	"/lattice.v1.DAGService/GetDAG":             true,
	"/lattice.v1.DAGService/ListDAGs":           true,
	"/lattice.v1.NodeService/List":              true,
	"/lattice.v1.NodeService/Heartbeat":         true,
	"/lattice.v1.AdminService/QuorumStatus":     true,
	"/lattice.v1.AdminService/ListVClusters":    true,
	"/lattice.v1.AdminService/GetPower":         true,
	"/lattice.v1.AdminService/ListTenants":      true,
	"/lattice.v1.DashboardService/WhoAmI":       true,
	"/lattice.v1.DashboardService/PowerHistory": true,
}

// auditRefused logs a state-changing call the interceptor refused: who
// as far as known (the token's user when it was known but not allowed).
func (a *authenticator) auditRefused(ctx context.Context, method string, req any, err error) {
	who := "unauthenticated"
	if tok := bearer(ctx); tok != "" {
		if id := a.authenticate(tok); id != nil {
			who = id.User
		}
	} else if leaf := peerCert(ctx); leaf != nil {
		who = "cn:" + leaf.Subject.CommonName
	}
	a.log.Info("audit", auditAttrs(ctx, who, method, req, err)...)
}

// auditLine logs one state-changing call: who (user, role, and how they
// authenticated), what (method and the objects it names), and the result.
func (s *Server) auditLine(ctx context.Context, method string, req any, err error) {
	s.log.Info("audit", auditAttrs(ctx, "", method, req, err)...)
}

func auditAttrs(ctx context.Context, who, method string, req any, err error) []any {
	var attrs []any
	if who != "" {
		attrs = append(attrs, "user", who)
	} else if id := caller(ctx); id != nil {
		attrs = append(attrs, "user", id.User, "role", string(id.Role))
		if cn, ok := ctx.Value(certCNKey{}).(string); ok && cn != "" {
			attrs = append(attrs, "cert_cn", cn)
		}
	} else {
		attrs = append(attrs, "user", "anonymous (auth off)")
	}
	attrs = append(attrs, "method", shortMethod(method))
	if m, ok := req.(proto.Message); ok {
		if t := auditTarget(m); t != "" {
			attrs = append(attrs, "target", t)
		}
	}
	if forwarded(ctx) {
		attrs = append(attrs, "forwarded", true)
	}
	attrs = append(attrs, "result", status.Code(err).String())
	if err != nil {
		msg := status.Convert(err).Message()
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		attrs = append(attrs, "reason", msg)
	}
	return attrs
}

// auditFields are the request fields that name what a call acts on.
var auditFields = []protoreflect.Name{"id", "ids", "name", "names", "node", "nodes", "tenant", "vcluster", "raft_addr", "dag_id", "priority_class", "reason"}

// auditTarget summarises the objects a request names ("id:12 tenant:bio"),
// at most 200 bytes, never the script, command or environment. A
// submission's are those of its request.
func auditTarget(m proto.Message) string {
	r := m.ProtoReflect()
	if fd := r.Descriptor().Fields().ByName("request"); fd != nil && fd.Kind() == protoreflect.MessageKind && !fd.IsList() && r.Has(fd) {
		r = r.Get(fd).Message()
	}
	fields := r.Descriptor().Fields()
	var b strings.Builder
	for _, name := range auditFields {
		fd := fields.ByName(name)
		if fd == nil || !r.Has(fd) || fd.Kind() == protoreflect.MessageKind {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(name))
		b.WriteByte(':')
		if fd.IsList() {
			l := r.Get(fd).List()
			for i := 0; i < l.Len() && i < 20; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprint(&b, l.Get(i).Interface())
			}
			if l.Len() > 20 {
				fmt.Fprintf(&b, ",…(%d)", l.Len())
			}
		} else {
			fmt.Fprint(&b, r.Get(fd).Interface())
		}
	}
	out := b.String()
	if len(out) > 200 {
		out = out[:200] + "…"
	}
	return out
}

// auditStream logs the streaming calls that change state or carry the
// whole state out (a step launch, a backup) when they start.
func (s *Server) auditStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	if auditedStreams[info.FullMethod] {
		s.auditLine(ss.Context(), info.FullMethod, nil, err)
	}
	return err
}

var auditedStreams = map[string]bool{
	"/lattice.v1.StepService/Launch":  true,
	"/lattice.v1.AdminService/Backup": true,
}
