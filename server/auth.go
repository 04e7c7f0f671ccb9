package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strconv"
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
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/rest"
)

// Authentication and authorization (auth/ holds the rules; this file wires
// them). With auth on (Config.TokensFile or Config.MungeSocket set) every
// call but the gRPC health checks must carry a credential: a MUNGE
// credential (munge.go: the uid is the caller, looked up among the users of
// the replicated state), a bearer token (the replicated state's tokens, then
// the tokens file's), or a verified client certificate (the tokens file's
// cn: lines). The interceptors check it and the method's rule before the
// forwarder or any handler runs, and handlers apply the object rules (whose
// allocation, which tenant). A follower forwards the caller's credential
// unchanged and the leader checks it again; users and tokens are replicated
// state, so every member knows them at once, and a revocation takes effect
// on a member as soon as it applies the command. A member's own calls to
// other members (join, health, quorum status) carry its Config.Token.

// authenticator holds the tokens file (reloaded when it changes), the
// MUNGE verifier and the view of the replicated users and tokens.
type authenticator struct {
	path  string // "" = no tokens file
	extra map[string]auth.Identity
	log   *slog.Logger
	srv   *Server
	munge *mungeVerifier // nil = MUNGE off
	// selfUID is the uid the member runs as: like root, an admin over MUNGE
	// (Slurm's SlurmUser).
	selfUID int
	// autoTenant, when set, makes an unknown MUNGE uid a user of this
	// tenant on first contact instead of refusing it.
	autoTenant string
	refusals   *logLimiter

	mu     sync.RWMutex
	tokens *auth.Tokens
	stamp  string // size and modification time of the file last read

	// sessions are the dashboard's (http_api.go); memberToken is what a
	// follower presents when it forwards a session's call.
	sessions    *rest.Sessions
	memberToken string
}

func newAuthenticator(s *Server, path string, extra map[string]auth.Identity, log *slog.Logger) (*authenticator, error) {
	a := &authenticator{path: path, extra: extra, log: log, srv: s, selfUID: os.Getuid(), refusals: newLogLimiter(10 * time.Second)}
	if s != nil {
		a.autoTenant = s.cfg.AutoUserTenant
		if s.cfg.MungeSocket != "" {
			a.munge = newMungeVerifier(s.cfg.MungeSocket, s.cfg.Clock)
		}
	}
	if path == "" {
		a.install(&auth.Tokens{})
		return a, nil
	}
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
	if a.path == "" {
		return false, nil
	}
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
	if a.path == "" {
		return
	}
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

// authenticate returns the identity of a bearer token: a token of the
// replicated state (refused with a reason when revoked or expired), else
// one of the tokens file.
func (a *authenticator) authenticate(token string) (*auth.Identity, error) {
	if a.srv != nil && a.srv.q != nil {
		var rec *quorum.Token
		hash := auth.HashToken(token)
		a.srv.view(func(st *quorum.State) {
			if t := st.TokenByHash(hash); t != nil {
				c := *t
				rec = &c
			}
		})
		if rec != nil {
			now := a.srv.cfg.Clock()
			switch {
			case !rec.Revoked.IsZero():
				return nil, fmt.Errorf("the token %s of %s was revoked at %s; ask an admin for a new one (`latticectl token create`)",
					rec.ID, rec.User, rec.Revoked.UTC().Format(time.RFC3339))
			case !rec.Valid(now):
				return nil, fmt.Errorf("the token %s of %s expired at %s; ask an admin for a new one (`latticectl token create`)",
					rec.ID, rec.User, rec.Expires.UTC().Format(time.RFC3339))
			}
			return tokenIdentity(rec), nil
		}
	}
	a.mu.RLock()
	id := a.tokens.Authenticate(token)
	a.mu.RUnlock()
	if id == nil {
		return nil, errors.New("the token is not known to this member (mistyped, or made for another cluster)")
	}
	c := *id
	c.Via = "tokens-file"
	return &c, nil
}

func tokenIdentity(t *quorum.Token) *auth.Identity {
	return &auth.Identity{User: t.User, Role: auth.Role(t.Role), Tenants: t.Tenants, Nodes: t.Nodes,
		MaxPriority: t.MaxPriority, DefaultTenant: t.DefaultTenant, Via: "token"}
}

func userIdentity(u *quorum.User, via string) *auth.Identity {
	return &auth.Identity{User: u.Name, Role: auth.Role(u.Role), Tenants: u.Tenants, MaxPriority: u.MaxPriority,
		DefaultTenant: u.DefaultTenant, Via: via, UID: u.UID}
}

// credential is the scheme ("Bearer", "MUNGE") and value of a call's
// authorization header.
func credential(ctx context.Context) (string, string) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok {
			return "Bearer", strings.TrimSpace(tok)
		}
		if cred, ok := strings.CutPrefix(v, MungeScheme); ok {
			return "MUNGE", strings.TrimSpace(cred)
		}
	}
	return "", ""
}

// bearer extracts the token of an "authorization: Bearer TOKEN" header.
func bearer(ctx context.Context) string {
	if scheme, v := credential(ctx); scheme == "Bearer" {
		return v
	}
	return ""
}

// check authenticates and authorizes one call; it returns the context the
// handler gets, or the refusal and who the caller claimed to be (for the
// audit line).
func (a *authenticator) check(ctx context.Context, method string) (context.Context, string, error) {
	if access, ok := auth.Rules[method]; ok && access == auth.Public {
		return ctx, "", nil
	}
	if scheme, cred := credential(ctx); scheme == "Bearer" && a.sessions != nil && strings.HasPrefix(cred, rest.SessionPrefix) {
		cctx, err := a.checkSession(ctx, method, cred)
		return cctx, "dashboard session", err
	}
	id, certCN, who, err := a.identify(ctx, method)
	if err != nil {
		return nil, who, err
	}
	id = onBehalfOf(ctx, id)
	if err := auth.Authorize(method, id); err != nil {
		a.refused(ctx, "refused a call", "user", id.User, "role", id.Role, "method", method)
		return nil, id.User, status.Error(codes.PermissionDenied, err.Error())
	}
	ctx = auth.NewContext(ctx, id)
	if certCN != "" {
		ctx = context.WithValue(ctx, certCNKey{}, certCN)
	}
	return ctx, id.User, nil
}

// identify finds the caller's identity from their credential.
func (a *authenticator) identify(ctx context.Context, method string) (id *auth.Identity, certCN, who string, err error) {
	scheme, cred := credential(ctx)
	switch scheme {
	case "Bearer":
		id, err := a.authenticate(cred)
		if err != nil {
			a.refused(ctx, "refused a token", "method", method, "reason", err.Error())
			return nil, "", "unauthenticated", status.Errorf(codes.Unauthenticated, "%s refused: %v", shortMethod(method), err)
		}
		return id, "", id.User, nil
	case "MUNGE":
		return a.mungeIdentity(ctx, method, cred)
	}
	leaf := peerCert(ctx)
	if leaf == nil {
		a.refused(ctx, "refused a call without a credential", "method", method)
		return nil, "", "unauthenticated", status.Errorf(codes.Unauthenticated,
			"%s refused: no credential; on a host with MUNGE latticectl sends one by itself (is munged running? --munge-socket, LATTICE_MUNGE_SOCKET), else send a bearer token (--token or LATTICE_TOKEN; an admin makes one with `latticectl token create`) or a client certificate (--cert/--key)", shortMethod(method))
	}
	if id, certCN, err = a.certIdentity(ctx, leaf); err != nil {
		a.refused(ctx, "refused a client certificate", "cn", leaf.Subject.CommonName, "method", method)
		return nil, "", "cn:" + leaf.Subject.CommonName, status.Errorf(codes.Unauthenticated, "%s refused: %v", shortMethod(method), err)
	}
	return id, certCN, id.User, nil
}

// mungeIdentity maps a MUNGE credential to a user: the user with its uid,
// else root or the member's own uid as an admin, else (with
// Config.AutoUserTenant) a new user of that tenant; other uids are refused
// with the command that would add them.
func (a *authenticator) mungeIdentity(ctx context.Context, method, cred string) (*auth.Identity, string, string, error) {
	if a.munge == nil {
		a.refused(ctx, "refused a MUNGE credential: MUNGE is off on this member", "method", method)
		return nil, "", "unauthenticated", status.Errorf(codes.Unauthenticated,
			"%s refused: this member does not check MUNGE credentials (start it with --munge-socket); send a token instead (--token, LATTICE_TOKEN)", shortMethod(method))
	}
	c, err := a.munge.verify(ctx, cred)
	if err != nil {
		a.refused(ctx, "refused a MUNGE credential", "method", method, "reason", err.Error())
		return nil, "", "unauthenticated", status.Errorf(codes.Unauthenticated, "%s refused: %v", shortMethod(method), err)
	}
	var u *quorum.User
	if a.srv != nil && a.srv.q != nil {
		a.srv.view(func(st *quorum.State) {
			if x := st.UserByUID(c.UID); x != nil {
				cp := *x
				u = &cp
			}
		})
	}
	if u != nil {
		return userIdentity(u, "munge"), "", u.Name, nil
	}
	name := unixName(c.UID)
	if c.UID == 0 || c.UID == a.selfUID {
		return &auth.Identity{User: name, Role: auth.RoleAdmin, MaxPriority: -1, Via: "munge", UID: c.UID}, "", name, nil
	}
	if a.autoTenant != "" && model.IsName(name) {
		nu := quorum.User{Name: name, UID: c.UID, Tenants: []string{a.autoTenant}, DefaultTenant: a.autoTenant,
			Role: string(auth.RoleUser), MaxPriority: -1, Auto: true}
		if a.srv.q.IsLeader() {
			r, err := a.srv.propose(ctx, &quorum.SetUser{User: nu, Create: true})
			switch {
			case err != nil:
				a.log.Warn("could not add a user on first contact", "user", name, "uid", c.UID, "err", err)
			case r.Rejection != nil:
				a.log.Warn("could not add a user on first contact", "user", name, "uid", c.UID, "err", r.Rejection.Message)
			default:
				a.log.Info("added a user on first contact", "user", name, "uid", c.UID, "tenant", a.autoTenant)
			}
		}
		return userIdentity(&nu, "munge"), "", name, nil
	}
	a.refused(ctx, "refused a MUNGE uid that is not a Lattice user", "uid", c.UID, "user", name, "method", method)
	return nil, "", fmt.Sprintf("uid:%d", c.UID), status.Errorf(codes.PermissionDenied,
		"%s refused: uid %d (%s) is not a Lattice user; an admin adds it with `latticectl user add %s --uid %d --tenants TENANT`",
		shortMethod(method), c.UID, name, name, c.UID)
}

// unixName is the account name of a uid on this member, else "uidN".
func unixName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("uid%d", uid)
}

// refused logs a refusal, at most one line per source (the peer's address)
// every few seconds; the next line says how many were left out.
func (a *authenticator) refused(ctx context.Context, msg string, attrs ...any) {
	src := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		src = p.Addr.String()
		if host, _, err := net.SplitHostPort(src); err == nil {
			src = host
		}
	}
	if ok, dropped := a.refusals.allow(src, time.Now()); ok {
		attrs = append(attrs, "source", src)
		if dropped > 0 {
			attrs = append(attrs, "similar_refusals_not_logged", dropped)
		}
		a.log.Warn(msg, attrs...)
	}
}

// logLimiter lets through one line per key every interval and counts the
// others.
type logLimiter struct {
	every time.Duration
	mu    sync.Mutex
	keys  map[string]*limitEntry
}

type limitEntry struct {
	last    time.Time
	dropped int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, keys: map[string]*limitEntry{}}
}

// allow reports whether a line about key may be logged now, and how many
// were left out since the last one.
func (l *logLimiter) allow(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.keys[key]
	if e == nil {
		if len(l.keys) > 10000 { // forget quiet sources
			for k, v := range l.keys {
				if now.Sub(v.last) > l.every {
					delete(l.keys, k)
				}
			}
		}
		l.keys[key] = &limitEntry{last: now}
		return true, 0
	}
	if now.Sub(e.last) < l.every {
		e.dropped++
		return false, 0
	}
	d := e.dropped
	e.last, e.dropped = now, 0
	return true, d
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
			return &auth.Identity{User: "member:" + cn, Role: auth.RoleAdmin, MaxPriority: -1, Via: "cert"}, "", nil
		}
		cn = fwd[0]
	}
	a.mu.RLock()
	id := a.tokens.AuthenticateCN(cn)
	a.mu.RUnlock()
	if id == nil {
		return nil, "", fmt.Errorf("the client certificate %q is not in this member's tokens file (add it with `latticed token create --cn %s`)", cn, cn)
	}
	c := *id
	c.Via = "cert"
	return &c, cn, nil
}

func shortMethod(m string) string {
	return strings.TrimPrefix(strings.TrimPrefix(m, "/"), "lattice.v1.")
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	cctx, who, err := a.check(ctx, info.FullMethod)
	if err != nil {
		if !readOnlyMethods[info.FullMethod] {
			a.auditRefused(ctx, who, info.FullMethod, req, err)
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
	ctx, who, err := a.check(ss.Context(), info.FullMethod)
	if err != nil {
		if auditedStreams[info.FullMethod] {
			a.auditRefused(ss.Context(), who, info.FullMethod, nil, err)
		}
		return err
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

// authOn reports whether calls are authenticated.
func (s *Server) authOn() bool { return s.auth != nil }

// caller is the identity of a call; nil with auth off.
func caller(ctx context.Context) *auth.Identity { return auth.FromContext(ctx) }

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
	"/grpc.health.v1.Health/Check":                    true,
	"/grpc.health.v1.Health/List":                     true,
	"/lattice.v1.AllocationService/Get":               true,
	"/lattice.v1.AllocationService/List":              true,
	"/lattice.v1.AllocationService/Explain":           true,
	"/lattice.v1.DAGService/GetDAG":                   true,
	"/lattice.v1.DAGService/ListDAGs":                 true,
	"/lattice.v1.NodeService/List":                    true,
	"/lattice.v1.NodeService/Heartbeat":               true,
	"/lattice.v1.AdminService/QuorumStatus":           true,
	"/lattice.v1.AdminService/ListVClusters":          true,
	"/lattice.v1.AdminService/GetPower":               true,
	"/lattice.v1.AdminService/ListTenants":            true,
	"/lattice.v1.DashboardService/WhoAmI":             true,
	"/lattice.v1.DashboardService/PowerHistory":       true,
	"/lattice.v1.AccountService/WhoAmI":               true,
	"/lattice.v1.AccountService/ListUsers":            true,
	"/lattice.v1.AccountService/ListTokens":           true,
	"/lattice.v1.ReservationService/ListReservations": true,
}

// auditRefused logs a state-changing call the interceptor refused: who
// as far as known (the credential's user when it was known but not
// allowed).
func (a *authenticator) auditRefused(ctx context.Context, who, method string, req any, err error) {
	if who == "" {
		who = "unauthenticated"
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
		if id.Via != "" {
			attrs = append(attrs, "via", id.Via)
		}
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
	"/lattice.v1.StepService/Launch":       true,
	"/lattice.v1.TerminalService/Terminal": true,
	"/lattice.v1.AdminService/Backup":      true,
}
