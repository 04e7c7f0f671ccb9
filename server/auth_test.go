package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// securedStack is a one-member quorum with auth on, one agent for node*
// and a tokens file with a user of each tenant, a tenant-admin, an admin
// and a second agent bound to other nodes.
type securedStack struct {
	srv    *Server
	conn   *grpc.ClientConn
	tokens map[string]string // name -> token
	file   string
	log    *lockedBuffer
}

func token(t *testing.T, seed byte) string {
	var r [32]byte
	r[0], r[1] = seed, 0x5a
	return auth.NewToken(r)
}

func startSecured(t *testing.T) *securedStack { return startSecuredWith(t, true) }

// startSecuredWith: runAsSelf false lets a root agent start jobs as their
// owners.
func startSecuredWith(t *testing.T, runAsSelf bool) *securedStack {
	t.Helper()
	dir := t.TempDir()
	idents := map[string]auth.Identity{
		"alice":  {User: "alice", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1},
		"bob":    {User: "bob", Role: auth.RoleUser, Tenants: []string{"bio"}, MaxPriority: -1},
		"carol":  {User: "carol", Role: auth.RoleTenantAdmin, Tenants: []string{"bio"}, MaxPriority: -1},
		"root":   {User: "root", Role: auth.RoleAdmin, MaxPriority: -1},
		"agent":  {User: "rack1", Role: auth.RoleAgent, Nodes: []string{"node*"}, MaxPriority: -1},
		"rogue":  {User: "rack9", Role: auth.RoleAgent, Nodes: []string{"other*"}, MaxPriority: -1},
		"nobody": {User: "nobody", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1},
	}
	st := &securedStack{tokens: map[string]string{}, file: filepath.Join(dir, "tokens"), log: &lockedBuffer{}}
	var lines []string
	seed := byte(1)
	for _, name := range []string{"alice", "bob", "carol", "root", "agent", "rogue", "nobody"} {
		tok := token(t, seed)
		seed++
		st.tokens[name] = tok
		lines = append(lines, auth.Entry(tok, idents[name]))
	}
	if err := os.WriteFile(st.file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(st.log, nil))
	cfg := Config{ID: "dev", DataDir: filepath.Join(dir, "quorum"), APIAddr: "127.0.0.1:0", InMemRaft: true, Logger: log,
		RaftLogLevel: "off", DefaultVCluster: "hpc-batch", KillGrace: time.Second, TokensFile: st.file,
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	st.srv = srv
	nodes, err := agent.SimulatedNodes("node", 4, 4, []string{"hpc-batch"}, nil, 100, 400, "fp1")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{ID: "a1", Servers: []string{srv.APIAddr()}, DataDir: filepath.Join(dir, "agent"),
		Nodes: nodes, HeartbeatInterval: time.Second, Grace: time.Second, Token: st.tokens["agent"], RunAsSelf: runAsSelf,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	waitFor(t, 20*time.Second, "nodes ready", func() bool {
		r, err := latticev1.NewNodeServiceClient(st.conn).List(st.as("root"), &latticev1.ListNodesRequest{States: []string{"Ready"}})
		return err == nil && len(r.Nodes) == 4
	})
	for _, tenant := range []string{"physics", "bio"} {
		if _, err := latticev1.NewAdminServiceClient(st.conn).SetTenant(st.as("root"), &latticev1.SetTenantRequest{Name: tenant}); err != nil {
			t.Fatalf("create tenant %s: %v", tenant, err)
		}
	}
	return st
}

// as is a context carrying the named identity's token.
func (s *securedStack) as(name string) context.Context {
	ctx := context.Background()
	if tok, ok := s.tokens[name]; ok {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	} else if name != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+name)
	}
	return ctx
}

func wantCode(t *testing.T, what string, err error, code codes.Code, words ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
	for _, w := range words {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Fatalf("%s: message %q does not say %q", what, status.Convert(err).Message(), w)
		}
	}
}

func TestSecurityOverGRPC(t *testing.T) {
	s := startSecured(t)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	nodes := latticev1.NewNodeServiceClient(s.conn)
	admin := latticev1.NewAdminServiceClient(s.conn)
	long := func(tenant string) *latticev1.AllocationRequest {
		return &latticev1.AllocationRequest{Name: "long", Tenant: tenant, NodesMin: 1, WalltimeSeconds: 300, Command: []string{"sleep 60"}}
	}
	bobs, err := allocs.Submit(s.as("bob"), &latticev1.SubmitRequest{Request: long("bio")})
	if err != nil {
		t.Fatalf("bob submits to his tenant: %v", err)
	}
	bobID := bobs.DisplayId
	waitFor(t, 20*time.Second, "bob's job running", func() bool {
		a, err := allocs.Get(s.as("bob"), &latticev1.GetAllocationRequest{Id: bobID})
		return err == nil && a.State == "RUNNING"
	})

	t.Run("credentials", func(t *testing.T) {
		_, err := allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
		wantCode(t, "no token", err, codes.Unauthenticated, "no credential")
		_, err = allocs.List(s.as("lat_madeup"), &latticev1.ListAllocationsRequest{})
		wantCode(t, "bad token", err, codes.Unauthenticated, "not known to this member")
		_, err = nodes.Drain(context.Background(), &latticev1.DrainRequest{Name: "node000", Reason: "x"})
		wantCode(t, "drain without token", err, codes.Unauthenticated)
	})

	t.Run("other tenant's work", func(t *testing.T) {
		_, err := allocs.Get(s.as("alice"), &latticev1.GetAllocationRequest{Id: bobID})
		wantCode(t, "show", err, codes.PermissionDenied, "alice (user) may not show allocation "+bobID, "bob of tenant bio")
		_, err = allocs.List(s.as("alice"), &latticev1.ListAllocationsRequest{Tenant: "bio"})
		wantCode(t, "list tenant bio", err, codes.PermissionDenied)
		_, err = allocs.List(s.as("alice"), &latticev1.ListAllocationsRequest{Ids: []string{bobID}})
		wantCode(t, "list by id", err, codes.PermissionDenied)
		l, err := allocs.List(s.as("alice"), &latticev1.ListAllocationsRequest{})
		if err != nil || len(l.Allocations) != 0 {
			t.Fatalf("alice's listing shows %d allocations (%v), want none of bob's", len(l.GetAllocations()), err)
		}
		_, err = allocs.Cancel(s.as("alice"), &latticev1.CancelRequest{Ids: []string{bobID}})
		wantCode(t, "cancel", err, codes.PermissionDenied, "may not cancel allocation "+bobID)
		_, err = allocs.Explain(s.as("alice"), &latticev1.ExplainRequest{Id: bobID})
		wantCode(t, "explain", err, codes.PermissionDenied)
		_, err = allocs.Checkpoint(s.as("alice"), &latticev1.CheckpointAllocationRequest{Id: bobID})
		wantCode(t, "checkpoint", err, codes.PermissionDenied)
		stream, err := allocs.Logs(s.as("alice"), &latticev1.LogsRequest{Id: bobID})
		if err == nil {
			_, err = stream.Recv()
		}
		wantCode(t, "logs", err, codes.PermissionDenied, "may not read the logs of allocation "+bobID)
	})

	t.Run("submit limits", func(t *testing.T) {
		_, err := allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: long("bio")})
		wantCode(t, "submit to another tenant", err, codes.PermissionDenied, "may not submit to tenant bio")
		r := long("physics")
		r.PriorityClass = 10
		_, err = allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: r})
		wantCode(t, "above the QOS ceiling", err, codes.PermissionDenied, "QOS ceiling is priority class 5")
		_, err = allocs.Submit(s.as("root"), &latticev1.SubmitRequest{Request: long("alice-typo")})
		wantCode(t, "unknown tenant", err, codes.InvalidArgument, `unknown tenant "alice-typo"`, "bio, physics")
		l, _ := admin.ListTenants(s.as("root"), &latticev1.ListTenantsRequest{})
		for _, tn := range l.GetTenants() {
			if tn.Name == "alice-typo" {
				t.Fatal("a refused submission created its tenant")
			}
		}
	})

	t.Run("admin only", func(t *testing.T) {
		_, err := nodes.Drain(s.as("alice"), &latticev1.DrainRequest{Name: "node000", Reason: "mine now"})
		wantCode(t, "drain", err, codes.PermissionDenied, "only an admin may")
		_, err = nodes.Drain(s.as("carol"), &latticev1.DrainRequest{Name: "node000", Reason: "mine now"})
		wantCode(t, "drain by a tenant-admin", err, codes.PermissionDenied)
		_, err = admin.SetTenant(s.as("alice"), &latticev1.SetTenantRequest{Name: "physics", MaxNodes: 100})
		wantCode(t, "budget", err, codes.PermissionDenied)
		_, err = admin.SetPowerBudget(s.as("alice"), &latticev1.SetPowerBudgetRequest{BudgetWatts: 1})
		wantCode(t, "power budget", err, codes.PermissionDenied)
		_, err = admin.QuorumJoin(s.as("alice"), &latticev1.QuorumJoinRequest{Id: "evil", RaftAddr: "127.0.0.1:1", ApiAddr: "127.0.0.1:2"})
		wantCode(t, "add a voter", err, codes.PermissionDenied)
		b, err := admin.Backup(s.as("carol"), &latticev1.BackupRequest{})
		if err == nil {
			_, err = b.Recv()
		}
		wantCode(t, "backup", err, codes.PermissionDenied)
		_, err = allocs.Submit(s.as("agent"), &latticev1.SubmitRequest{Request: long("bio")})
		wantCode(t, "agent submits", err, codes.PermissionDenied)
	})

	t.Run("agent bound to its nodes", func(t *testing.T) {
		_, err := nodes.Register(s.as("rogue"), &latticev1.RegisterNodesRequest{AgentId: "x", Nodes: []*latticev1.Node{{Name: "node001"}}})
		wantCode(t, "register another's node", err, codes.PermissionDenied, "rack9 (agent) may not report for node node001")
		_, err = nodes.Heartbeat(s.as("rogue"), &latticev1.HeartbeatRequest{Nodes: []string{"node001"}})
		wantCode(t, "heartbeat for another's node", err, codes.PermissionDenied)
		// A rogue agent with a node of its own reports bob's job done.
		rn, _ := agent.SimulatedNodes("other", 1, 1, []string{"hpc-batch"}, nil, 100, 400, "fp1")
		ctx, cancel := context.WithCancel(s.as("rogue"))
		defer cancel()
		stream, err := latticev1.NewAgentServiceClient(s.conn).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hello := &latticev1.AgentHello{AgentId: "rogue", Nodes: []*latticev1.Node{agent.NodeToProto(&rn[0])}}
		if err := stream.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Hello{Hello: hello}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("rogue agent with its own node: %v", err)
		}
		report := &latticev1.AllocationReport{AllocationId: bobs.Ids[0], State: "COMPLETED", Seq: 1, HasExitCode: true}
		if err := stream.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Report{Report: report}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the refusal logged", func() bool {
			return strings.Contains(s.log.String(), "refused an agent report for an allocation not on its nodes")
		})
		a, err := allocs.Get(s.as("bob"), &latticev1.GetAllocationRequest{Id: bobID})
		if err != nil || a.State != "RUNNING" {
			t.Fatalf("bob's job after a rogue report: %v %v, want RUNNING", a.GetState(), err)
		}
		// And it may not register a node that another agent owns.
		stream2, err := latticev1.NewAgentServiceClient(s.conn).Connect(s.as("rogue"))
		if err != nil {
			t.Fatal(err)
		}
		n0 := &latticev1.Node{Name: "node000"}
		_ = stream2.Send(&latticev1.AgentMessage{Msg: &latticev1.AgentMessage_Hello{Hello: &latticev1.AgentHello{AgentId: "rogue2", Nodes: []*latticev1.Node{n0}}}})
		_, err = stream2.Recv()
		wantCode(t, "connect for another's node", err, codes.PermissionDenied)
	})

	t.Run("owners and tenant admins", func(t *testing.T) {
		mine, err := allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: long("physics")})
		if err != nil {
			t.Fatal(err)
		}
		a, err := allocs.Get(s.as("alice"), &latticev1.GetAllocationRequest{Id: mine.DisplayId})
		if err != nil || a.Request.Tenant != "physics" {
			t.Fatalf("alice shows her own job: %v", err)
		}
		if r, err := allocs.Cancel(s.as("alice"), &latticev1.CancelRequest{Ids: []string{mine.DisplayId}}); err != nil || !r.Results[0].Cancelled {
			t.Fatalf("alice cancels her own job: %v %v", r, err)
		}
		if r, err := allocs.Cancel(s.as("carol"), &latticev1.CancelRequest{Ids: []string{bobID}}); err != nil || !r.Results[0].Cancelled {
			t.Fatalf("the tenant-admin of bio cancels bob's job: %v %v", r, err)
		}
	})

	t.Run("audit", func(t *testing.T) {
		log := s.log.String()
		want := "msg=audit member=dev user=carol role=tenant-admin via=tokens-file method=AllocationService/Cancel target=ids:" + bobID + " result=OK"
		if !strings.Contains(log, want) {
			t.Fatalf("no audit line %q in:\n%s", want, log)
		}
		for _, want := range []string{
			"msg=audit member=dev user=alice method=NodeService/Drain target=\"name:node000 reason:mine now\" result=PermissionDenied",
			"msg=audit member=dev user=unauthenticated method=NodeService/Drain target=\"name:node000 reason:x\" result=Unauthenticated",
			"msg=audit member=dev user=alice role=user via=tokens-file method=AllocationService/Submit target=\"name:long tenant:bio\" result=PermissionDenied",
		} {
			if !strings.Contains(log, want) {
				t.Fatalf("no audit line %q in:\n%s", want, log)
			}
		}
		if !strings.Contains(log, "refused a call") {
			t.Fatalf("no audit line for carol's cancel in:\n%s", log)
		}
	})
}

// TestTokensFileHotReload: a token appended to the file of a running
// server works within a few seconds, and a broken file keeps the old ones.
func TestTokensFileHotReload(t *testing.T) {
	s := startSecured(t)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	newTok := token(t, 99)
	f, err := os.OpenFile(s.file, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(auth.Entry(newTok, auth.Identity{User: "dave", Role: auth.RoleUser, Tenants: []string{"physics"}, MaxPriority: -1}) + "\n")
	f.Close()
	s.tokens["dave"] = newTok
	waitFor(t, 5*time.Second, "the new token accepted", func() bool {
		_, err := allocs.List(s.as("dave"), &latticev1.ListAllocationsRequest{})
		return err == nil
	})
	// Rotation: the old line deleted, its token is refused and the new one still works.
	b, err := os.ReadFile(s.file)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !strings.Contains(line, " user=nobody ") {
			keep = append(keep, line)
		}
	}
	if err := os.WriteFile(s.file, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the deleted token refused", func() bool {
		_, err := allocs.List(s.as("nobody"), &latticev1.ListAllocationsRequest{})
		return status.Code(err) == codes.Unauthenticated
	})
	if _, err := allocs.List(s.as("dave"), &latticev1.ListAllocationsRequest{}); err != nil {
		t.Fatalf("the rotated-in token stopped working: %v", err)
	}
	if err := os.WriteFile(s.file, []byte("garbage line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the bad file reported", func() bool {
		return strings.Contains(s.log.String(), "tokens file not reloaded")
	})
	if _, err := allocs.List(s.as("dave"), &latticev1.ListAllocationsRequest{}); err != nil {
		t.Fatalf("a broken tokens file dropped the previous tokens: %v", err)
	}
}

// TestEveryRPCHasAnAuthRule: every method of every registered service has
// an entry in auth.Rules (a method without one is refused to everyone).
func TestEveryRPCHasAnAuthRule(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFilesByPackage("lattice.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				full := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				n++
				if _, ok := auth.Rules[full]; !ok {
					t.Errorf("%s has no rule in auth.Rules", full)
				}
			}
		}
		return true
	})
	if n < 25 {
		t.Fatalf("only %d methods found", n)
	}
}

// TestJobRunsAsItsSubmitter: with the agent running as root, a job's `id`
// prints the uid and gid of the user who submitted it, and its output file
// belongs to that user. It needs root and a local user "nobody".
func TestJobRunsAsItsSubmitter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the agent must run as root to start jobs as another user; this test runs as uid", os.Geteuid())
	}
	who, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no local user nobody to run a job as: %v", err)
	}
	s := startSecuredWith(t, false)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	sub, err := allocs.Submit(s.as("nobody"), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Name: "whoami", Tenant: "physics", NodesMin: 1, WalltimeSeconds: 60, WorkDir: "/",
		Command: []string{"id -u; id -g"}}})
	if err != nil {
		t.Fatal(err)
	}
	var a *latticev1.Allocation
	waitFor(t, 20*time.Second, "the job to end", func() bool {
		a, err = allocs.Get(s.as("nobody"), &latticev1.GetAllocationRequest{Id: sub.DisplayId})
		return err == nil && (a.State == "COMPLETED" || a.State == "FAILED")
	})
	if a.State != "COMPLETED" || a.Request.GetUser() != "nobody" {
		t.Fatalf("job %s as %q: %s %s %s", sub.DisplayId, a.Request.GetUser(), a.State, a.Reason, a.ReasonDetail)
	}
	stream, err := allocs.Logs(s.as("nobody"), &latticev1.LogsRequest{Id: sub.DisplayId})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		chunk, err := stream.Recv()
		if err != nil {
			break
		}
		out.Write(chunk.Data)
	}
	if got, want := strings.Fields(out.String()), []string{who.Uid, who.Gid}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("id printed %q, want uid and gid %v of nobody", out.String(), want)
	}
}
