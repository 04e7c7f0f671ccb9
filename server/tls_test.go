package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/quorum"
)

// testCA makes a CA in dir with member certificates for members and client
// certificates for clients; it returns the files of each by name.
func testCA(t *testing.T, dir string, members, clients []string) map[string]pki.Files {
	t.Helper()
	ca, _, err := pki.OpenCA(dir, "test CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]pki.Files{}
	for _, m := range members {
		c, k, err := ca.Issue(pki.KindMember, m, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out[m] = pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: c, Key: k}
	}
	for _, u := range clients {
		c, k, err := ca.Issue(pki.KindClient, u, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out[u] = pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: c, Key: k}
	}
	return out
}

// recordingRelay accepts on a loopback port and copies every connection to
// target, recording the bytes that pass in either direction.
type recordingRelay struct {
	lis net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func newRecordingRelay(t *testing.T, target string) *recordingRelay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recordingRelay{lis: lis}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			go r.pipe(in, out)
			go r.pipe(out, in)
		}
	}()
	return r
}

func (r *recordingRelay) pipe(from, to net.Conn) {
	defer to.Close()
	b := make([]byte, 32<<10)
	for {
		n, err := from.Read(b)
		if n > 0 {
			r.mu.Lock()
			r.buf.Write(b[:n])
			r.mu.Unlock()
			if _, werr := to.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *recordingRelay) captured() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// TestRaftTrafficHidesJobEnvironment: two members over TCP, the follower
// reached through a relay that records every byte. A job submitted with a
// distinctive environment value replicates to the follower; with TLS the
// recording never contains the value, in plaintext it does (so the test
// can fail).
func TestRaftTrafficHidesJobEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tls     bool
		visible bool
	}{{"plaintext", false, true}, {"tls", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := testCA(t, filepath.Join(dir, "pki"), []string{"m1", "m2"}, []string{"alice"})
			start := func(id string, bootstrap bool) *Server {
				cfg := Config{ID: id, DataDir: filepath.Join(dir, id), RaftAddr: freeAddr(t), APIAddr: "127.0.0.1:0",
					Bootstrap: bootstrap, RaftLogLevel: "off", RaftNoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}, DefaultVCluster: "hpc-batch"}
				if tc.tls {
					cfg.TLS = files[id]
				}
				s, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Serve(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Stop)
				return s
			}
			m1 := start("m1", true)
			waitFor(t, 10*time.Second, "m1 leads", m1.q.IsLeader)
			m2 := start("m2", false)
			relay := newRecordingRelay(t, m2.Quorum().RaftAddr())
			if err := m1.Quorum().AddVoter("m2", relay.lis.Addr().String(), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			creds := insecure.NewCredentials()
			if tc.tls {
				cfg, err := pki.Client(pki.Files{CA: files["m1"].CA})
				if err != nil {
					t.Fatal(err)
				}
				creds = credentials.NewTLS(cfg)
			}
			conn, err := grpc.NewClient(m1.APIAddr(), grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			const secret = "API_KEY=zebra-7731-quokka-secret"
			// Adding a member may cost an election: retry with one request id.
			var resp *latticev1.SubmitResponse
			var last error
			defer func() {
				if t.Failed() {
					t.Logf("last submission error: %v", last)
				}
			}()
			waitFor(t, 15*time.Second, "the submission committed", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				var err error
				resp, err = latticev1.NewAllocationServiceClient(conn).Submit(ctx, &latticev1.SubmitRequest{ClientRequestId: "env-capture",
					Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, Env: []string{secret}}})
				last = err
				return err == nil
			})
			waitFor(t, 10*time.Second, "the job replicated to m2", func() bool {
				found := false
				m2.Quorum().View(func(st *quorum.State) {
					a := st.Allocation(resp.Ids[0])
					found = a != nil && len(a.Request.Env) == 1 && a.Request.Env[0] == secret
				})
				return found
			})
			got := relay.captured()
			if len(got) < 1000 {
				t.Fatalf("the relay saw only %d bytes: the traffic did not go through it", len(got))
			}
			if seen := bytes.Contains(got, []byte("zebra-7731")); seen != tc.visible {
				t.Fatalf("the job environment visible in %d captured bytes: %v, want %v", len(got), seen, tc.visible)
			}
		})
	}
}

// TestRaftRefusesNonMembers: the Raft port of a TLS member completes no
// handshake with a client certificate (signed by the same CA but not a
// member's) nor without any certificate.
func TestRaftRefusesNonMembers(t *testing.T) {
	dir := t.TempDir()
	files := testCA(t, filepath.Join(dir, "pki"), []string{"m1"}, []string{"alice"})
	s, err := New(Config{ID: "m1", DataDir: filepath.Join(dir, "m1"), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		Bootstrap: true, RaftLogLevel: "off", RaftNoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: files["m1"]})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, who := range []string{"alice", "anonymous"} {
		cfg, err := pki.Client(pki.Files{CA: files["m1"].CA})
		if who == "alice" {
			cfg, err = pki.Client(files["alice"])
		}
		if err != nil {
			t.Fatal(err)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", s.Quorum().RaftAddr(), cfg)
		if err == nil {
			// TLS 1.3: the server's refusal of the client certificate
			// arrives with the first read.
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || os.IsTimeout(err) {
			t.Fatalf("%s reached the Raft port of a TLS member: %v", who, err)
		}
	}
	// A member configured with a client certificate refuses to start.
	_, err = pki.Peer(files["alice"])
	if err == nil || !strings.Contains(err.Error(), "not a member certificate") {
		t.Fatalf("pki.Peer with a client certificate: %v", err)
	}
}

func dialConn(t *testing.T, s *Server, f pki.Files) *grpc.ClientConn {
	t.Helper()
	cfg, err := pki.Client(f)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s.APIAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestClientCertificateIdentity: with TLS and a tokens file, a client
// certificate whose common name has a cn: entry acts as that identity; an
// unmapped one, or none, is refused; a client cannot claim another's name
// with the header members use when forwarding.
func TestClientCertificateIdentity(t *testing.T) {
	dir := t.TempDir()
	files := testCA(t, filepath.Join(dir, "pki"), []string{"dev"}, []string{"alice", "eve"})
	tokens := filepath.Join(dir, "tokens")
	admin := token(t, 1)
	lines := auth.CertEntry("alice", auth.Identity{User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}) + "\n" +
		auth.Entry(admin, auth.Identity{User: "root", Role: auth.RoleAdmin, MaxPriority: -1}) + "\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{ID: "dev", DataDir: filepath.Join(dir, "q"), APIAddr: "127.0.0.1:0", InMemRaft: true, RaftLogLevel: "off",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: files["dev"], TokensFile: tokens, Tenants: []string{"physics", "bio"},
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}, DefaultVCluster: "hpc-batch"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	dial := func(f pki.Files) latticev1.AllocationServiceClient {
		cfg, err := pki.Client(f)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(s.APIAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return latticev1.NewAllocationServiceClient(conn)
	}
	job := func(tenant string) *latticev1.SubmitRequest {
		return &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{Tenant: tenant, NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}}}
	}
	alice, eve, anon := dial(files["alice"]), dial(files["eve"]), dial(pki.Files{CA: files["dev"].CA})
	ctx := context.Background()
	waitFor(t, 10*time.Second, "tenants created", func() bool {
		_, err := alice.Submit(ctx, job("physics"))
		return err == nil
	})
	a, err := alice.List(ctx, &latticev1.ListAllocationsRequest{})
	if err != nil || len(a.Allocations) != 1 || a.Allocations[0].Request.User != "alice" {
		t.Fatalf("alice's own listing: %v %v", a, err)
	}
	_, err = alice.Submit(ctx, job("bio"))
	wantCode(t, "alice's certificate submits to bio", err, codes.PermissionDenied, "may not submit to tenant bio")
	_, err = eve.Submit(ctx, job("physics"))
	wantCode(t, "an unmapped certificate", err, codes.Unauthenticated, `client certificate "eve" is not in this member's tokens file`)
	_, err = anon.Submit(ctx, job("physics"))
	wantCode(t, "no certificate, no token", err, codes.Unauthenticated, "no credential")
	spoof := metadata.AppendToOutgoingContext(ctx, forwardedCNKey, "alice")
	_, err = eve.Submit(spoof, job("physics"))
	wantCode(t, "eve claims alice's name", err, codes.Unauthenticated)
	_, err = anon.Submit(spoof, job("physics"))
	wantCode(t, "no certificate, claims alice's name", err, codes.Unauthenticated)
	// A member's certificate is a member identity: it may manage the
	// quorum (join through a member credential), without a token.
	memberCfg, err := pki.Client(files["dev"])
	if err != nil {
		t.Fatal(err)
	}
	mconn, err := grpc.NewClient(s.APIAddr(), grpc.WithTransportCredentials(credentials.NewTLS(memberCfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer mconn.Close()
	if _, err := latticev1.NewAdminServiceClient(mconn).SetTenant(ctx, &latticev1.SetTenantRequest{Name: "chem"}); err != nil {
		t.Fatalf("an admin call with the member certificate: %v", err)
	}
	_, err = latticev1.NewAdminServiceClient(dialConn(t, s, files["alice"])).SetTenant(ctx, &latticev1.SetTenantRequest{Name: "chem2"})
	wantCode(t, "an admin call with alice's certificate", err, codes.PermissionDenied)
	// A token still works over TLS.
	_, err = anon.Submit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+admin), job("bio"))
	if err != nil {
		t.Fatalf("an admin token over TLS: %v", err)
	}
}

// TestAgentOverTLSWithItsCertificate: an agent reaches a TLS member and
// authenticates with its client certificate alone (a cn: line with role
// agent and its node pattern); its nodes become Ready and run a job. An
// agent whose certificate names nodes it does not own is refused.
func TestAgentOverTLSWithItsCertificate(t *testing.T) {
	dir := t.TempDir()
	files := testCA(t, filepath.Join(dir, "pki"), []string{"dev"}, []string{"rack1", "rack9"})
	tokens := filepath.Join(dir, "tokens")
	admin := token(t, 1)
	lines := auth.CertEntry("rack1", auth.Identity{User: "rack1", Role: auth.RoleAgent, Nodes: []string{"node*"}, MaxPriority: -1}) + "\n" +
		auth.CertEntry("rack9", auth.Identity{User: "rack9", Role: auth.RoleAgent, Nodes: []string{"other*"}, MaxPriority: -1}) + "\n" +
		auth.Entry(admin, auth.Identity{User: "root", Role: auth.RoleAdmin, MaxPriority: -1}) + "\n"
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{ID: "dev", DataDir: filepath.Join(dir, "q"), APIAddr: "127.0.0.1:0", InMemRaft: true, RaftLogLevel: "off",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: files["dev"], TokensFile: tokens, Tenants: []string{"ops"},
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}, DefaultVCluster: "hpc-batch", KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	runAgent := func(name string) func() {
		cfg, err := pki.Client(files[name])
		if err != nil {
			t.Fatal(err)
		}
		nodes, _ := agent.SimulatedNodes("node", 2, 2, []string{"hpc-batch"}, nil, 100, 400, "fp1")
		ag, err := agent.New(agent.Config{ID: name, Servers: []string{s.APIAddr()}, DataDir: filepath.Join(dir, name), Nodes: nodes,
			HeartbeatInterval: time.Second, Grace: time.Second, TLS: cfg, CAFile: files[name].CA, RunAsSelf: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = ag.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	conn := dialConn(t, s, pki.Files{CA: files["dev"].CA})
	asAdmin := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+admin)
	ready := func() int {
		r, err := latticev1.NewNodeServiceClient(conn).List(asAdmin, &latticev1.ListNodesRequest{States: []string{"Ready"}})
		if err != nil {
			return -1
		}
		return len(r.Nodes)
	}
	stop9 := runAgent("rack9")
	time.Sleep(2 * time.Second)
	stop9()
	if n := ready(); n != 0 {
		t.Fatalf("an agent certificate for other* registered %d node* nodes", n)
	}
	defer runAgent("rack1")()
	waitFor(t, 20*time.Second, "rack1's nodes ready", func() bool { return ready() == 2 })
	allocs := latticev1.NewAllocationServiceClient(conn)
	resp, err := allocs.Submit(asAdmin, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Tenant: "ops", NodesMin: 1, WalltimeSeconds: 60, Command: []string{"test -n \"$LATTICE_CACERT\""}, WorkDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the job completed (with LATTICE_CACERT set)", func() bool {
		a, err := allocs.Get(asAdmin, &latticev1.GetAllocationRequest{Id: resp.DisplayId})
		return err == nil && a.State == "COMPLETED"
	})
}
