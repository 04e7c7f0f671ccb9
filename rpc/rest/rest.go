package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/api/lattice/v1/gateway"
	"github.com/latticehpc/lattice/web"
)

// CookieName is the dashboard's session cookie (HttpOnly, SameSite=Strict).
const CookieName = "lattice_session"

// Config is what the HTTP face needs from its member.
type Config struct {
	// Conn reaches the member's own gRPC server (its interceptors apply).
	Conn *grpc.ClientConn
	// Sessions keeps the dashboard's login codes and sessions.
	Sessions *Sessions
	// Secure: served over TLS, so cookies are marked Secure.
	Secure bool
	// EventsInterval is how often /api/v1/events looks for changes
	// (default 1 s).
	EventsInterval time.Duration
	// StateVersion, when set, is the version of the member's applied
	// state: /api/v1/events lists again only when it moved (or every
	// eventsResync), so idle streams cost nothing.
	StateVersion func() uint64
	Logger       *slog.Logger
}

type handler struct {
	cfg    Config
	gw     *runtime.ServeMux
	alloc  latticev1.AllocationServiceClient
	nodes  latticev1.NodeServiceClient
	dash   latticev1.DashboardServiceClient
	assets http.Handler
}

// marshaler writes and reads the protos' own field names (snake_case, as in
// the .proto files and `latticectl -o json`), with every field present.
var marshaler = &runtime.JSONPb{
	MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	UnmarshalOptions: protojson.UnmarshalOptions{},
}

// New builds the handler of /api/v1/ and /ui/.
func New(ctx context.Context, cfg Config) (http.Handler, error) {
	if cfg.Conn == nil || cfg.Sessions == nil {
		return nil, fmt.Errorf("rest: Conn and Sessions are required")
	}
	if cfg.EventsInterval <= 0 {
		cfg.EventsInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{
		cfg:    cfg,
		alloc:  latticev1.NewAllocationServiceClient(cfg.Conn),
		nodes:  latticev1.NewNodeServiceClient(cfg.Conn),
		dash:   latticev1.NewDashboardServiceClient(cfg.Conn),
		assets: web.Handler(),
	}
	h.gw = runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler),
		// Nothing of the request's headers reaches the gRPC server but
		// the credential credential() picks: a client must not set the
		// members' own forwarding metadata.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(func(_ context.Context, r *http.Request) metadata.MD {
			if c := credential(r); c != "" {
				return metadata.Pairs("authorization", c)
			}
			return nil
		}),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gateway.RegisterAllocationServiceHandler,
		gateway.RegisterNodeServiceHandler,
		gateway.RegisterAdminServiceHandler,
		gateway.RegisterDAGServiceHandler,
		gateway.RegisterDashboardServiceHandler,
	} {
		if err := register(ctx, h.gw, cfg.Conn); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(gateway.OpenAPI)
	})
	mux.HandleFunc("GET /api/v1/events", h.events)
	mux.Handle("/api/v1/", h.gw)
	mux.HandleFunc("GET /ui/login", h.loginPage)
	mux.HandleFunc("POST /ui/login", h.loginToken)
	mux.HandleFunc("POST /ui/logout", h.logout)
	mux.Handle("/ui/", http.StripPrefix("/ui", h.assets))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	return securityHeaders(mux), nil
}

// securityHeaders keeps the dashboard's pages to their own origin: no
// framing, no scripts or styles from elsewhere (the assets are embedded).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "same-origin") // no-referrer would make browsers send "Origin: null" on form posts
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

// credential is the bearer credential of a request: its Authorization
// header, else its session cookie.
func credential(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		return h
	}
	if c, err := r.Cookie(CookieName); err == nil && validSession(c.Value) {
		return "Bearer " + c.Value
	}
	return ""
}

func validSession(v string) bool {
	if !strings.HasPrefix(v, SessionPrefix) || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// outgoing is the context of a call made on behalf of r.
func outgoing(r *http.Request) context.Context {
	ctx := r.Context()
	if c := credential(r); c != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", c)
	}
	return ctx
}

// writeError answers with a gRPC error the way the gateway does: its HTTP
// status and {"code", "message"}.
func writeError(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
	_ = json.NewEncoder(w).Encode(map[string]any{"code": int(st.Code()), "message": st.Message(), "details": []any{}})
}

// badRequest is a 400 naming the field.
func badRequest(w http.ResponseWriter, field, allowed string) {
	writeError(w, status.Errorf(codes.InvalidArgument, "%s: %s", field, allowed))
}
