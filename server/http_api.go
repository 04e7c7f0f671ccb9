package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/rest"
)

// The member's HTTP face (Config.HTTPAddr): the REST API and the dashboard
// of rpc/rest. Their calls reach this member's gRPC server through an
// in-process listener, so every interceptor applies to them as to
// latticectl's calls.
//
// A browser session (rest.Sessions, in this member's memory) is a bearer
// credential that only this member knows. When a follower forwards a
// session's call to the leader, it presents its own credential
// (Config.Token) and names the session's identity in x-lattice-on-behalf-of;
// the leader believes that header only from an admin caller on a forwarded
// call (a member's token is an admin's; an admin may act as anyone anyway)
// and only for a human identity.

const onBehalfOfKey = "x-lattice-on-behalf-of"

// sessionCallKey marks a call authenticated by a dashboard session; its
// value is a sessionCall.
type sessionCallKey struct{}

type sessionCall struct {
	identity    []byte // JSON of the session's auth.Identity
	memberToken string
}

// checkSession authenticates a call by a dashboard session.
func (a *authenticator) checkSession(ctx context.Context, method, session string) (context.Context, error) {
	id := a.sessions.Lookup(session)
	if id == nil {
		a.log.Warn("refused an expired or unknown dashboard session", "method", method)
		return nil, status.Errorf(codes.Unauthenticated, "%s refused: the dashboard session has expired or was logged out; log in again (latticectl dashboard)", shortMethod(method))
	}
	if err := auth.Authorize(method, id); err != nil {
		a.log.Warn("refused a call", "user", id.User, "role", id.Role, "method", method)
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	b, err := json.Marshal(id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	ctx = auth.NewContext(ctx, id)
	return context.WithValue(ctx, sessionCallKey{}, sessionCall{identity: b, memberToken: a.memberToken}), nil
}

// forwardSession rewrites the metadata of a forwarded call: a client's own
// x-lattice-on-behalf-of never passes; a session's call carries the
// member's credential and the session's identity.
func forwardSession(ctx context.Context, md metadata.MD) {
	md.Delete(onBehalfOfKey)
	sc, ok := ctx.Value(sessionCallKey{}).(sessionCall)
	if !ok {
		return
	}
	md.Set(onBehalfOfKey, string(sc.identity))
	if sc.memberToken != "" {
		md.Set("authorization", "Bearer "+sc.memberToken)
	}
}

// onBehalfOf is the identity a forwarded call acts as: the one its
// x-lattice-on-behalf-of names when an admin (a member) forwarded it, else
// the caller's own.
func onBehalfOf(ctx context.Context, id *auth.Identity) *auth.Identity {
	if id == nil || id.Role != auth.RoleAdmin || !forwarded(ctx) {
		return id
	}
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(onBehalfOfKey)
	if len(v) == 0 {
		return id
	}
	var as auth.Identity
	if err := json.Unmarshal([]byte(v[0]), &as); err != nil || as.Validate() != nil || as.Role == auth.RoleAgent {
		return id
	}
	return &as
}

// dashboardService answers latticectl dashboard and the dashboard's "who
// am I". Both are local methods: the codes live in this member's memory.
type dashboardService struct {
	latticev1.UnimplementedDashboardServiceServer
	s *Server
}

func (d *dashboardService) CreateLogin(ctx context.Context, _ *latticev1.CreateDashboardLoginRequest) (*latticev1.DashboardLogin, error) {
	base := d.s.DashboardURL()
	if base == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "member %s serves no dashboard: start it with --http ADDR", d.s.cfg.ID)
	}
	code, expires := d.s.sessions.NewCode(caller(ctx))
	return &latticev1.DashboardLogin{
		Url: base + "login?code=" + url.QueryEscape(code), Code: code, ExpiresUnixMs: expires.UnixMilli(),
	}, nil
}

func (d *dashboardService) WhoAmI(ctx context.Context, _ *latticev1.WhoAmIRequest) (*latticev1.DashboardIdentity, error) {
	id := caller(ctx)
	if !d.s.authOn() || id == nil {
		return &latticev1.DashboardIdentity{AuthEnabled: d.s.authOn(), Role: string(auth.RoleAdmin)}, nil
	}
	return &latticev1.DashboardIdentity{AuthEnabled: true, User: id.User, Role: string(id.Role), Tenants: id.Tenants}, nil
}

// DashboardLogin mints a one-time dashboard URL that logs a browser in as
// id (latticed dev prints one for its own admin). "" when --http is off.
func (s *Server) DashboardLogin(id *auth.Identity) string {
	base := s.DashboardURL()
	if base == "" {
		return ""
	}
	code, _ := s.sessions.NewCode(id)
	return base + "login?code=" + url.QueryEscape(code)
}

// HTTPAddr is where the REST API and the dashboard listen ("" when off).
func (s *Server) HTTPAddr() string {
	if s.httpLis == nil {
		return ""
	}
	return s.httpLis.Addr().String()
}

// DashboardURL is the dashboard's address, ending in /ui/ ("" when off).
// An unspecified listen address is named by the host's name.
func (s *Server) DashboardURL() string {
	addr := s.HTTPAddr()
	if addr == "" {
		return ""
	}
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	scheme := "http"
	if s.httpTLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/ui/"
}

// listenHTTP binds Config.HTTPAddr (New).
func (s *Server) listenHTTP(serverTLS *tls.Config) error {
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen for the REST API and dashboard on %s: %w", s.cfg.HTTPAddr, err)
	}
	if serverTLS != nil {
		s.httpTLS = serverTLS.Clone()
		s.httpTLS.NextProtos = []string{"h2", "http/1.1"}
		lis = tls.NewListener(lis, s.httpTLS)
	}
	s.httpLis = lis
	return nil
}

// serveHTTP starts the in-process gRPC listener and the HTTP server (Serve).
func (s *Server) serveHTTP(ctx context.Context) error {
	if s.httpLis == nil {
		return nil
	}
	inproc := bufconn.Listen(1 << 20)
	creds := insecure.NewCredentials()
	if s.httpTLS != nil {
		// The gRPC server speaks TLS on every listener; this one is an
		// in-memory pipe to ourselves, so there is no one to verify, and no
		// client certificate is presented (a call has only the caller's
		// credential).
		creds = credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // in-process pipe
	}
	conn, err := grpc.NewClient("passthrough:///in-process", grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return inproc.DialContext(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return err
	}
	h, err := rest.New(ctx, rest.Config{Conn: conn, Sessions: s.sessions, Secure: s.httpTLS != nil, Logger: s.log,
		StateVersion: func() (v uint64) {
			s.view(func(st *quorum.State) { v = st.Version })
			return v
		}})
	if err != nil {
		conn.Close()
		return err
	}
	s.inprocConn = conn
	s.restSrv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.samplePower(ctx)
	}()
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(inproc); err != nil {
			s.log.Error("in-process api listener", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.restSrv.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	return nil
}

// stopHTTP ends the HTTP server (open event streams included) before the
// gRPC server stops (Stop).
func (s *Server) stopHTTP() {
	if s.restSrv == nil {
		if s.httpLis != nil {
			s.httpLis.Close()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if err := s.restSrv.Shutdown(ctx); err != nil {
		_ = s.restSrv.Close()
	}
	cancel()
	s.inprocConn.Close()
}

// The power history the dashboard draws: this member samples its committed
// state's system-wide figures every powerSampleEvery and keeps a day.
const (
	powerSampleEvery = 10 * time.Second
	powerSamplesKept = int(24 * time.Hour / powerSampleEvery)
)

type powerHistory struct {
	mu      sync.Mutex
	samples []*latticev1.PowerSample // a ring once full
	next    int
}

func (h *powerHistory) add(p *latticev1.PowerSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) < powerSamplesKept {
		h.samples = append(h.samples, p)
		return
	}
	h.samples[h.next] = p
	h.next = (h.next + 1) % powerSamplesKept
}

// since lists the samples after t (ms), oldest first.
func (h *powerHistory) since(t int64) []*latticev1.PowerSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*latticev1.PowerSample, 0, len(h.samples))
	for i := range h.samples {
		p := h.samples[(h.next+i)%len(h.samples)]
		if p.TimeUnixMs > t {
			out = append(out, p)
		}
	}
	return out
}

// samplePower records the power figures now and every powerSampleEvery
// until ctx ends.
func (s *Server) samplePower(ctx context.Context) {
	admin := &adminService{s: s}
	tick := time.NewTicker(powerSampleEvery)
	defer tick.Stop()
	for {
		p := admin.power()
		s.powerHist.add(&latticev1.PowerSample{TimeUnixMs: s.cfg.Clock().UnixMilli(), BudgetWatts: p.BudgetWatts,
			EstimatedWatts: p.EstimatedWatts, MeasuredWatts: p.MeasuredWatts, CountedWatts: p.CountedWatts})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (d *dashboardService) PowerHistory(_ context.Context, req *latticev1.PowerHistoryRequest) (*latticev1.PowerHistoryResponse, error) {
	return &latticev1.PowerHistoryResponse{Samples: d.s.powerHist.since(req.SinceUnixMs), IntervalMs: powerSampleEvery.Milliseconds()}, nil
}
