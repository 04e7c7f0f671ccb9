package server

import (
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/pki"
)

// TestDashboardSessionOnFollower: a browser logged in on a follower acts
// as its user on the leader. The follower forwards the session's calls with
// its own credential and the session's identity; the leader takes that
// identity (alice, not the member's admin) for what she asks. A client that
// sends the forwarding headers itself gains nothing.
func TestDashboardSessionOnFollower(t *testing.T) {
	dir := t.TempDir()
	rootTok, aliceTok := token(t, 41), token(t, 42)
	tokens := filepath.Join(dir, "tokens")
	lines := auth.Entry(rootTok, auth.Identity{User: "root", Role: auth.RoleAdmin, MaxPriority: -1}) + "\n" +
		auth.Entry(aliceTok, auth.Identity{User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}) + "\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := startTrioWith(t, func(c *Config) {
		c.TokensFile, c.Token, c.HTTPAddr, c.Tenants = tokens, rootTok, "127.0.0.1:0", []string{"physics"}
	})
	var leader *Server
	waitFor(t, 20*time.Second, "a leader", func() bool { leader = leaderOf(servers); return leader != nil })
	var follower *Server
	for _, s := range servers {
		if s != leader {
			follower = s
			break
		}
	}
	conn, err := grpc.NewClient(follower.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	asAlice := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+aliceTok)
	login, err := latticev1.NewDashboardServiceClient(conn).CreateLogin(asAlice, &latticev1.CreateDashboardLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(login.Url, follower.HTTPAddr()) {
		t.Fatalf("login URL %s is not the follower's (%s)", login.Url, follower.HTTPAddr())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(login.Url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	base := "http://" + follower.HTTPAddr()

	// A write through the follower's dashboard, as alice.
	resp, err = browser.Post(base+"/api/v1/allocations", "application/json",
		strings.NewReader(`{"request": {"name": "via-follower", "tenant": "physics", "nodes_min": 1, "command": ["true"], "hold": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		DisplayID string `json:"display_id"`
		Message   string `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("submit through the follower's dashboard: %d %s", resp.StatusCode, sub.Message)
	}
	a, err := latticev1.NewAllocationServiceClient(conn).Get(asAlice, &latticev1.GetAllocationRequest{Id: sub.DisplayID})
	if err != nil {
		t.Fatal(err)
	}
	if a.Request.User != "alice" {
		t.Fatalf("the forwarded submission was made as %q, want alice", a.Request.User)
	}
	// What alice may not do, the session may not do on the leader either.
	resp, err = browser.Post(base+"/api/v1/nodes/n1/drain", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("alice's session drains through the follower: %d", resp.StatusCode)
	}
	// alice forging the members' headers on her own gRPC call to the leader.
	lconn, err := grpc.NewClient(leader.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer lconn.Close()
	forged := metadata.AppendToOutgoingContext(asAlice, forwardedKey, "1", onBehalfOfKey, `{"User":"root","Role":"admin","MaxPriority":-1}`)
	_, err = latticev1.NewNodeServiceClient(lconn).Drain(forged, &latticev1.DrainRequest{Name: "n1"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice with forged forwarding headers: %v, want PermissionDenied", err)
	}
}

// TestHTTPOverTLS: with TLS the REST API and dashboard are served over
// HTTPS only, and the in-process hop presents no certificate: a request
// without a credential is refused, not taken for the member itself.
func TestHTTPOverTLS(t *testing.T) {
	dir := t.TempDir()
	files := testCA(t, filepath.Join(dir, "pki"), []string{"m1"}, nil)
	rootTok := token(t, 43)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(auth.Entry(rootTok, auth.Identity{User: "root", Role: auth.RoleAdmin, MaxPriority: -1})+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{ID: "m1", DataDir: filepath.Join(dir, "m1"), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Bootstrap: true, RaftLogLevel: "off", RaftNoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: files["m1"], TokensFile: tokens})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if !strings.HasPrefix(s.DashboardURL(), "https://") {
		t.Fatalf("dashboard URL %s", s.DashboardURL())
	}
	cfg, err := pki.Client(pki.Files{CA: files["m1"].CA})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	get := func(tok string) int {
		req, _ := http.NewRequest("GET", "https://"+s.HTTPAddr()+"/api/v1/whoami", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, 20*time.Second, "the member answers", func() bool { return get(rootTok) == http.StatusOK })
	if code := get(""); code != http.StatusUnauthorized {
		t.Fatalf("no credential over HTTPS: %d, want 401", code)
	}
	if resp, err := http.Get("http://" + s.HTTPAddr() + "/api/v1/whoami"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP answered %d on a TLS member", resp.StatusCode)
		}
	}
}
