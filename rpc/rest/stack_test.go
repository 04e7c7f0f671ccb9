package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/server"
)

// stack is one member with authentication on, its HTTP face, and an agent
// running 8 simulated nodes: hpc-batch node000–003 (dragonfly group 0) and
// ml-training node004–007 (group 1). Identities: alice (user, physics), bob
// (user, bio), root (admin), the agent.
type stack struct {
	srv    *server.Server
	base   string // http://127.0.0.1:PORT
	tokens map[string]string
	conn   *grpc.ClientConn
}

func testToken(seed byte) string {
	var r [32]byte
	r[0], r[1] = seed, 0x77
	return auth.NewToken(r)
}

func startStack(t *testing.T) *stack {
	t.Helper()
	dir := t.TempDir()
	idents := []struct {
		name string
		id   auth.Identity
	}{
		{"alice", auth.Identity{User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}},
		{"bob", auth.Identity{User: "bob", Role: auth.RoleUser, Tenants: []string{"bio"}, MaxPriority: -1}},
		{"root", auth.Identity{User: "root", Role: auth.RoleAdmin, MaxPriority: -1}},
		{"agent", auth.Identity{User: "rack1", Role: auth.RoleAgent, Nodes: []string{"node*"}, MaxPriority: -1}},
	}
	st := &stack{tokens: map[string]string{}}
	var lines []string
	for i, x := range idents {
		st.tokens[x.name] = testToken(byte(i + 1))
		lines = append(lines, auth.Entry(st.tokens[x.name], x.id))
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg := server.Config{ID: "m1", DataDir: filepath.Join(dir, "quorum"), APIAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		InMemRaft: true, Logger: log, RaftLogLevel: "off", DefaultVCluster: "hpc-batch", KillGrace: time.Second,
		TokensFile: tokens, Token: st.tokens["root"], Tenants: []string{"physics", "bio"},
		VClusters: []model.VCluster{server.DefaultVCluster("hpc-batch"), server.DefaultVCluster("ml-training")}}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	st.srv = srv
	st.base = "http://" + srv.HTTPAddr()
	nodes, err := agent.SimulatedNodes("node", 8, 4, []string{"hpc-batch", "ml-training"}, nil, 100, 400, "fp1")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{ID: "a1", Servers: []string{srv.APIAddr()}, DataDir: filepath.Join(dir, "agent"),
		Nodes: nodes, HeartbeatInterval: time.Second, Grace: time.Second, Token: st.tokens["agent"], RunAsSelf: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ag.Run(ctx)
	}()
	st.conn, err = grpc.NewClient(srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.conn.Close()
		cancel()
		<-done
		srv.Stop()
	})
	waitFor(t, 30*time.Second, "8 nodes ready", func() bool {
		r, err := latticev1.NewNodeServiceClient(st.conn).List(st.as("root"), &latticev1.ListNodesRequest{States: []string{"Ready"}})
		return err == nil && len(r.Nodes) == 8
	})
	waitFor(t, 30*time.Second, "tenants created", func() bool {
		r, err := latticev1.NewAdminServiceClient(st.conn).ListTenants(st.as("root"), &latticev1.ListTenantsRequest{})
		return err == nil && len(r.Tenants) >= 2
	})
	return st
}

// as is a gRPC context carrying the named identity's token.
func (s *stack) as(name string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+s.tokens[name])
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reply is one HTTP answer.
type reply struct {
	status int
	body   []byte
	header http.Header
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("not JSON (%d): %s", r.status, r.body)
	}
	return m
}

// call makes one plain HTTP request, as curl would: who names the bearer
// token sent ("" = none; a value not in tokens is sent as it is).
func (s *stack) call(t *testing.T, who, method, path string, body any) reply {
	t.Helper()
	return s.callWith(t, http.DefaultClient, who, method, path, body)
}

func (s *stack) callWith(t *testing.T, client *http.Client, who, method, path string, body any) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if who != "" {
		tok, ok := s.tokens[who]
		if !ok {
			tok = who
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, header: resp.Header}
}

// browserClient is an HTTP client with a cookie jar that does not follow
// redirects (a test looks at them).
func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// submit submits through the REST API as who and returns the display id.
func (s *stack) submit(t *testing.T, who string, req map[string]any) string {
	t.Helper()
	r := s.call(t, who, "POST", "/api/v1/allocations", map[string]any{"request": req})
	if r.status != http.StatusOK {
		t.Fatalf("submit as %s: %d %s", who, r.status, r.body)
	}
	return r.json(t)["display_id"].(string)
}

func (s *stack) waitState(t *testing.T, who, id, state string) map[string]any {
	t.Helper()
	var a map[string]any
	waitFor(t, 60*time.Second, "allocation "+id+" "+state, func() bool {
		r := s.call(t, who, "GET", "/api/v1/allocations/"+id, nil)
		if r.status != http.StatusOK {
			return false
		}
		a = r.json(t)
		return a["state"] == state
	})
	return a
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
