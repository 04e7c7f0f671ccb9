package main

// Helpers for the multi-process quorum tests in cluster_test.go: they build
// the latticed binary once, start real `latticed server` and `latticed agent`
// processes on 127.0.0.1 ports, talk to them over the generated gRPC clients,
// and run the invariant checker against backups taken from the leader.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/pki"
	"github.com/latticehpc/lattice/quorum"
)

// bearerCreds sends a bearer token with every call (over plain loopback).
type bearerCreds string

func (b bearerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearerCreds) RequireTransportSecurity() bool { return false }

// latticedBin is the binary built by TestMain.
var latticedBin string

// Credentials of every test cluster (auth is on): an admin token, which
// TestMain also saves as the user's token in configDir (children get
// XDG_CONFIG_HOME=configDir, so latticectl finds it and `latticed dev`
// reuses it), and an agent token for every node.
var configDir, testAdminToken, testAgentToken string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "latticed-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	latticedBin = filepath.Join(dir, "latticed")
	// The job supervisor next to latticed, as installed: the agents of
	// these tests start it for every run (agent/supervise.go).
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../lattice-job-supervisor")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building latticed for the cluster tests:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	configDir = filepath.Join(dir, "config")
	testAdminToken, testAgentToken = mintToken(), mintToken()
	if _, err := latticecli.SaveToken(func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return configDir
		}
		return ""
	}, testAdminToken); err != nil {
		fmt.Fprintln(os.Stderr, "saving the test token:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// --- ports ---------------------------------------------------------------------------

var (
	portsMu sync.Mutex
	used    = map[string]bool{}
)

// freeAddr returns a 127.0.0.1 address nobody listens on now and that this
// test binary has not handed out before.
func freeAddr(t *testing.T) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		addr := l.Addr().String()
		l.Close()
		if !used[addr] {
			used[addr] = true
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// --- processes -----------------------------------------------------------------------

// proc is one child process in its own process group, its stdout and
// stderr appended to a log file.
type proc struct {
	name    string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // Wait's result; valid once done is closed
	started time.Time
}

// childEnv is the test's environment without LATTICE_* variables, so a
// developer's settings cannot leak into the processes under test.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LATTICE_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	// A munged on the test host must not turn authentication on.
	return append(env, "XDG_CONFIG_HOME="+configDir, "LATTICE_MUNGE_SOCKET=off")
}

func startProc(t *testing.T, logPath, name string, args ...string) *proc {
	t.Helper()
	return startProcIn(t, "", logPath, name, args...)
}

// startProcIn is startProc in network namespace netns ("" = the test's).
func startProcIn(t *testing.T, netns, logPath, name string, args ...string) *proc {
	t.Helper()
	return startBinIn(t, latticedBin, netns, logPath, name, args...)
}

// startBinIn is startProcIn with another latticed binary (an older release).
func startBinIn(t *testing.T, latticedBin, netns, logPath, name string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "=== %s start %s: latticed %s\n", name, time.Now().Format("15:04:05.000"), strings.Join(args, " "))
	cmd := exec.Command(latticedBin, args...)
	if netns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, latticedBin}, args...)...) // ip execs latticed: same pid
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = childEnv()
	// Own process group so that kill reaches everything it started; and a
	// safety net should the test binary die without running its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, args: args, logPath: logPath, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait reports whether the process ended within timeout.
func (p *proc) wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM to the process and waits up to timeout for it to end,
// then kills the group. It reports whether it ended on SIGTERM.
func (p *proc) stop(timeout time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if p.wait(timeout) {
		// Anything the process left in its group goes too.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return true
	}
	p.kill()
	return false
}

// tail returns the last n lines of the process's log.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// --- members and the cluster -----------------------------------------------------------

// member is one `latticed server` process and a client connection to its API.
type member struct {
	id, dataDir, raftAddr, apiAddr string
	role                           []string // --bootstrap or --join ADDRS: kept for restarts
	netns                          string   // network namespace it runs in ("" = the test's)
	bin                            string   // its latticed binary ("" = the cluster's)
	extra                          []string // more flags of its own (kept for restarts)
	mu                             sync.Mutex
	p                              *proc // the current process; guarded by mu (restarts replace it)
	conn                           *grpc.ClientConn
	admin                          latticev1.AdminServiceClient
	allocs                         latticev1.AllocationServiceClient
	nodes                          latticev1.NodeServiceClient
}

func (m *member) proc() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.p
}

func (m *member) alive() bool {
	p := m.proc()
	return p != nil && !p.exited()
}

// cluster is a set of members and at most one agent, all real processes.
type cluster struct {
	t   *testing.T
	dir string
	// Auth is on: every member reads tokensFile (an admin token, which is
	// also the members' own credential, and an agent token for every node).
	tokensFile, adminToken, agentToken string
	// tlsDir, when set, holds a CA (ca.crt) and member certificates
	// (ID.crt, ID.key): members serve the API and Raft over TLS.
	tlsDir string
	// bin is the latticed binary members and the agent run ("" = the one
	// TestMain built); a member's own bin overrides it.
	bin     string
	members []*member
	agent   *proc
	// memberFlags follow serverFlags on every member's command line (a
	// later flag wins: e.g. the shipped node timeout in a long test).
	memberFlags []string
	logs        []string // every log file, for tails on failure
	mu          sync.Mutex
	procs       []*proc
}

// serverFlags are the flags every member gets: short liveness so node
// failures show quickly, fault injection for the partition test, and no
// metrics listener.
var serverFlags = []string{
	"--metrics-addr", "", "--fault-injection", "--raft-log-level", "warn",
	"--degraded-after", "3s", "--node-timeout", "6s", "--kill-grace", "2s",
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, dir: t.TempDir()}
	c.tokensFile, c.adminToken, c.agentToken = filepath.Join(c.dir, "tokens"), testAdminToken, testAgentToken
	entries := auth.Entry(c.adminToken, auth.Identity{User: "tester", Role: auth.RoleAdmin, MaxPriority: -1}) + "\n" +
		auth.Entry(c.agentToken, auth.Identity{User: "agent1", Role: auth.RoleAgent, Nodes: []string{"*"}, MaxPriority: -1}) + "\n"
	if err := os.WriteFile(c.tokensFile, []byte(entries), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.mu.Lock()
		procs := append([]*proc(nil), c.procs...)
		c.mu.Unlock()
		// The agent first, on SIGTERM, so it stops the jobs it started.
		for _, p := range procs {
			if p.name == "agent" {
				p.stop(5 * time.Second)
			}
		}
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.kill()
			}()
		}
		wg.Wait()
		for _, m := range c.members {
			if m.conn != nil {
				m.conn.Close()
			}
		}
		if t.Failed() || os.Getenv("LATTICED_TEST_LOGS") != "" {
			lines := 60
			if os.Getenv("LATTICED_TEST_LOGS") == "all" {
				lines = 1 << 30
			}
			for _, path := range c.logs {
				t.Logf("--- tail of %s ---\n%s", filepath.Base(path), tail(path, lines))
			}
		}
	})
	return c
}

func (c *cluster) track(p *proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// addMember starts a new member; role is nil for a lone restart,
// {"--bootstrap"} or {"--join", ADDRS}.
func (c *cluster) addMember(id string, role ...string) *member {
	c.t.Helper()
	return c.addMemberAt(id, freeAddr(c.t), freeAddr(c.t), "", role...)
}

// addMemberAt is addMember with its addresses and network namespace.
func (c *cluster) addMemberAt(id, raftAddr, apiAddr, netns string, role ...string) *member {
	c.t.Helper()
	m := &member{id: id, dataDir: filepath.Join(c.dir, id), raftAddr: raftAddr, apiAddr: apiAddr, role: role, netns: netns}
	creds := insecure.NewCredentials()
	if c.tlsDir != "" {
		cfg, err := pki.Client(pki.Files{CA: filepath.Join(c.tlsDir, pki.CAFile)})
		if err != nil {
			c.t.Fatal(err)
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(m.apiAddr, grpc.WithTransportCredentials(creds),
		grpc.WithPerRPCCredentials(bearerCreds(c.adminToken)))
	if err != nil {
		c.t.Fatal(err)
	}
	m.conn = conn
	m.admin = latticev1.NewAdminServiceClient(conn)
	m.allocs = latticev1.NewAllocationServiceClient(conn)
	m.nodes = latticev1.NewNodeServiceClient(conn)
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	c.logs = append(c.logs, filepath.Join(c.dir, id+".log"))
	c.start(m)
	return m
}

// start (re)starts m's process with its flags and data dir.
func (c *cluster) start(m *member) {
	c.t.Helper()
	args := []string{"--log-level", "info", "server", "--id", m.id, "--data-dir", m.dataDir,
		"--raft-addr", m.raftAddr, "--api-addr", m.apiAddr,
		"--tokens-file", c.tokensFile, "--token", c.adminToken, "--tenants", "default,stream,t,ops"}
	args = append(append(append(append(args, serverFlags...), c.memberFlags...), m.role...), m.extra...)
	if c.tlsDir != "" {
		args = append(args, "--tls-ca", filepath.Join(c.tlsDir, pki.CAFile),
			"--tls-cert", filepath.Join(c.tlsDir, m.id+".crt"), "--tls-key", filepath.Join(c.tlsDir, m.id+".key"))
	}
	bin := cmp.Or(m.bin, c.bin, latticedBin)
	p := startBinIn(c.t, bin, m.netns, filepath.Join(c.dir, m.id+".log"), m.id, args...)
	m.mu.Lock()
	m.p = p
	m.mu.Unlock()
	c.track(p)
}

func (c *cluster) apiAddrs() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.apiAddr)
	}
	return out
}

func (c *cluster) alive() []*member {
	c.mu.Lock()
	members := append([]*member(nil), c.members...)
	c.mu.Unlock()
	var out []*member
	for _, m := range members {
		if m.alive() {
			out = append(out, m)
		}
	}
	return out
}

// startMembers forms a cluster of n members: s1 bootstraps, the others join
// through the API addresses of those started before them.
func (c *cluster) startMembers(n int) {
	c.t.Helper()
	s1 := c.addMember("s1", "--bootstrap")
	c.waitFor(15*time.Second, "s1 to lead", func() (bool, string) {
		st, err := selfStatus(s1, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return st.Members[0].Role == "leader", "role " + st.Members[0].Role
	})
	for i := 2; i <= n; i++ {
		c.addMember(fmt.Sprintf("s%d", i), "--join", strings.Join(c.apiAddrs(), ","))
	}
	c.waitHealthy(n, 30*time.Second)
}

// waitHealthy waits until the leader's QuorumStatus lists n voters, all
// healthy, each with a published API address.
func (c *cluster) waitHealthy(n int, timeout time.Duration) *latticev1.QuorumStatusResponse {
	c.t.Helper()
	var last *latticev1.QuorumStatusResponse
	c.waitFor(timeout, fmt.Sprintf("%d healthy members", n), func() (bool, string) {
		l := c.leader(2 * time.Second)
		if l == nil {
			return false, "no leader"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, err := l.admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
		if err != nil {
			return false, err.Error()
		}
		last = st
		healthy := 0
		for _, m := range st.Members {
			if m.Healthy && m.Voter && m.ApiAddr != "" {
				healthy++
			}
		}
		return len(st.Members) == n && healthy == n, describeStatus(st)
	})
	return last
}

func describeStatus(st *latticev1.QuorumStatusResponse) string {
	var parts []string
	for _, m := range st.Members {
		parts = append(parts, fmt.Sprintf("%s:%s healthy=%v voter=%v api=%q", m.Id, m.Role, m.Healthy, m.Voter, m.ApiAddr))
	}
	return fmt.Sprintf("leader=%s term=%d commit=%d [%s]", st.LeaderId, st.Term, st.CommitIndex, strings.Join(parts, ", "))
}

// startAgent runs `latticed agent --simulate nodes` against every member
// and waits until all its nodes are Ready.
func (c *cluster) startAgent(nodes, groupSize int) {
	c.t.Helper()
	path := filepath.Join(c.dir, "agent.log")
	c.logs = append(c.logs, path)
	args := []string{"--log-level", "info", "agent", "--id", "agent1",
		"--data-dir", filepath.Join(c.dir, "agent"), "--simulate", fmt.Sprint(nodes), "--group-size", fmt.Sprint(groupSize),
		"--server", strings.Join(c.apiAddrs(), ","), "--heartbeat", "1s", "--grace", "2s", "--token", c.agentToken}
	if c.tlsDir != "" {
		args = append(args, "--tls-ca", filepath.Join(c.tlsDir, pki.CAFile))
	}
	c.agent = startBinIn(c.t, cmp.Or(c.bin, latticedBin), "", path, "agent", args...)
	c.track(c.agent)
	c.waitNodesReady(nodes, 30*time.Second)
}

func (c *cluster) waitNodesReady(n int, timeout time.Duration) {
	c.t.Helper()
	c.waitFor(timeout, fmt.Sprintf("%d nodes Ready", n), func() (bool, string) {
		resp, err := c.listNodes()
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for _, nd := range resp {
			if nd.State == "Ready" {
				ready++
			}
		}
		return ready == n, fmt.Sprintf("%d of %d nodes ready", ready, len(resp))
	})
}

// waitFor polls cond every 50 ms until it holds or timeout passes; cond's
// string says what it saw last, for the failure message.
func (c *cluster) waitFor(timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- talking to members ------------------------------------------------------------------

// selfStatus asks m about itself only (role, commit and applied index,
// state version) without it asking the others.
func selfStatus(m *member, timeout time.Duration) (*latticev1.QuorumStatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-lattice-self-only", "1")
	// WaitForReady: a member just restarted may find the connection still
	// backing off from its previous process.
	st, err := m.admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, err
	}
	if len(st.Members) != 1 {
		return nil, fmt.Errorf("self-only status of %s lists %d members", m.id, len(st.Members))
	}
	return st, nil
}

// leader returns the live member that says it leads, waiting up to timeout;
// nil if none does.
func (c *cluster) leader(timeout time.Duration) *member {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range c.alive() {
			if st, err := selfStatus(m, 500*time.Millisecond); err == nil && st.Members[0].Role == "leader" {
				return m
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (c *cluster) mustLeader(timeout time.Duration) *member {
	c.t.Helper()
	l := c.leader(timeout)
	if l == nil {
		c.t.Fatalf("no leader within %s", timeout)
	}
	return l
}

// readTargets lists the live members, the leader first: a member that knows
// no leader (cut off by a partition) answers reads from its own, possibly
// stale, state, so reads that must see the latest commits ask the leader.
func (c *cluster) readTargets() []*member {
	targets := c.alive()
	if l := c.leader(0); l != nil {
		targets = append([]*member{l}, targets...)
	}
	return targets
}

// listAllocations lists every retained allocation, asking the leader first
// (followers forward reads to the leader they know).
func (c *cluster) listAllocations() ([]*latticev1.Allocation, error) {
	var last error
	for _, m := range c.readTargets() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := m.allocs.List(ctx, &latticev1.ListAllocationsRequest{})
		cancel()
		if err == nil {
			return resp.Allocations, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no member listed allocations: %v", last)
}

func (c *cluster) listNodes() ([]*latticev1.Node, error) {
	var last error
	for _, m := range c.readTargets() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := m.nodes.List(ctx, &latticev1.ListNodesRequest{})
		cancel()
		if err == nil {
			return resp.Nodes, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no member listed nodes: %v", last)
}

// retryable says whether a submission may be retried with the same request
// id: no leader, leadership lost mid-apply, or no answer in time.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// submitResult is one acknowledged submission.
type submitResult struct {
	requestID string
	id        uint64
	ackAt     time.Time
	sentAt    time.Time // start of the attempt that was acknowledged
	attempts  int
}

// submit sends one submission to targets round-robin (starting at
// targets[start%len]) until one acknowledges it, always with the same
// client request id; it gives up after giveUp.
func submit(targets []*member, start int, requestID string, req *latticev1.AllocationRequest, perAttempt, giveUp time.Duration) (submitResult, error) {
	deadline := time.Now().Add(giveUp)
	var last error
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		m := targets[(start+attempt)%len(targets)]
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), perAttempt)
		resp, err := m.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: req, ClientRequestId: requestID})
		cancel()
		if err == nil {
			if len(resp.Ids) != 1 {
				return submitResult{}, fmt.Errorf("%s: acknowledged with %d ids", requestID, len(resp.Ids))
			}
			return submitResult{requestID: requestID, id: resp.Ids[0], ackAt: time.Now(), sentAt: sent, attempts: attempt + 1}, nil
		}
		if !retryable(err) {
			return submitResult{}, fmt.Errorf("%s via %s: %w", requestID, m.id, err)
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return submitResult{}, fmt.Errorf("%s: not acknowledged within %s: %v", requestID, giveUp, last)
}

// shortJob is a one-node job that sleeps a moment; its name is its request
// id so the allocation can be matched to the submission.
func shortJob(name, workDir string) *latticev1.AllocationRequest {
	return &latticev1.AllocationRequest{Name: name, Tenant: "stream", NodesMin: 1, WalltimeSeconds: 120,
		Command: []string{"sleep 0.2"}, WorkDir: workDir}
}

// ledger records acknowledged submissions and checks that no two
// acknowledged requests were given the same allocation id.
type ledger struct {
	mu       sync.Mutex
	acked    map[string]submitResult
	owner    map[uint64]string
	problems []string
}

func newLedger() *ledger {
	return &ledger{acked: map[string]submitResult{}, owner: map[uint64]string{}}
}

func (l *ledger) record(r submitResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.acked[r.requestID]; ok && prev.id != r.id {
		l.problems = append(l.problems, fmt.Sprintf("request %s acknowledged twice with ids %d and %d", r.requestID, prev.id, r.id))
	}
	if o, ok := l.owner[r.id]; ok && o != r.requestID {
		l.problems = append(l.problems, fmt.Sprintf("allocation id %d acknowledged to both %s and %s", r.id, o, r.requestID))
	}
	l.acked[r.requestID] = r
	l.owner[r.id] = r.requestID
}

func (l *ledger) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, msg)
}

func (l *ledger) snapshot() map[string]submitResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]submitResult, len(l.acked))
	for k, v := range l.acked {
		out[k] = v
	}
	return out
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// checkAcked asserts that every acknowledged submission exists with its
// acknowledged id and name, that no request created two allocations, and
// returns the allocations by id.
func (c *cluster) checkAcked(l *ledger, prefix string) map[uint64]*latticev1.Allocation {
	c.t.Helper()
	l.mu.Lock()
	for _, p := range l.problems {
		c.t.Error(p)
	}
	l.mu.Unlock()
	allocs, err := c.listAllocations()
	if err != nil {
		c.t.Fatal(err)
	}
	byID := map[uint64]*latticev1.Allocation{}
	perName := map[string]int{}
	for _, a := range allocs {
		byID[a.Id] = a
		if strings.HasPrefix(a.Request.GetName(), prefix) {
			perName[a.Request.GetName()]++
		}
	}
	acked := l.snapshot()
	for rid, r := range acked {
		a := byID[r.id]
		switch {
		case a == nil:
			c.t.Errorf("acknowledged submission %s (id %d) is lost", rid, r.id)
		case a.Request.GetName() != rid:
			c.t.Errorf("acknowledged id %d of %s holds allocation named %q", r.id, rid, a.Request.GetName())
		}
	}
	for name, n := range perName {
		if n > 1 {
			c.t.Errorf("request %s created %d allocations (a retry was duplicated)", name, n)
		}
		if _, ok := acked[name]; !ok {
			c.t.Errorf("allocation %s exists but was never acknowledged", name)
		}
	}
	return byID
}

// waitCompleted waits until every acknowledged submission is COMPLETED;
// any other terminal state fails the test at once.
func (c *cluster) waitCompleted(l *ledger, timeout time.Duration) time.Duration {
	c.t.Helper()
	acked := l.snapshot()
	return c.waitFor(timeout, fmt.Sprintf("%d submissions to complete", len(acked)), func() (bool, string) {
		allocs, err := c.listAllocations()
		if err != nil {
			return false, err.Error()
		}
		byID := map[uint64]*latticev1.Allocation{}
		for _, a := range allocs {
			byID[a.Id] = a
		}
		states := map[string]int{}
		for rid, r := range acked {
			a := byID[r.id]
			if a == nil {
				states["MISSING"]++
				continue
			}
			states[a.State]++
			if a.State == "FAILED" || a.State == "CANCELLED" {
				c.t.Fatalf("submission %s (id %s) ended %s: %s", rid, a.DisplayId, a.State, a.Reason)
			}
		}
		return states["COMPLETED"] == len(acked), fmt.Sprint(states)
	})
}

// --- backups and the invariant checker ---------------------------------------------------

// backup fetches a backup through m (followers forward it to the leader).
// It returns an error unless the stream ended cleanly.
func backup(m *member, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stream, err := m.admin.Backup(ctx, &latticev1.BackupRequest{})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(chunk.Data)
	}
}

// backupAny tries the leader first, then every live member.
func (c *cluster) backupAny(timeout time.Duration) ([]byte, string, error) {
	var last error
	for _, m := range c.readTargets() {
		b, err := backup(m, timeout)
		if err == nil {
			return b, m.id, nil
		}
		last = err
	}
	return nil, "", fmt.Errorf("no backup: %v", last)
}

// checkBackup runs the invariant checker on a backup: VerifySnapshot
// (checksum, structure, CheckInvariants), and every violation listed.
func checkBackup(b []byte) (quorum.Summary, []string) {
	sum, err := quorum.VerifySnapshot(bytes.NewReader(b))
	if err == nil {
		return sum, nil
	}
	problems := []string{err.Error()}
	if st, rerr := quorum.ReadSnapshot(bytes.NewReader(b)); rerr == nil {
		problems = append(problems, quorum.CheckInvariants(st)...)
	}
	return sum, problems
}

// invariantWatch runs the checker against a fresh backup from the leader
// every period until finish.
type invariantWatch struct {
	c          *cluster
	period     time.Duration
	started    time.Time
	stop, done chan struct{}
	mu         sync.Mutex
	checks     int
	violations []string
}

func (c *cluster) watchInvariants(period time.Duration) *invariantWatch {
	w := &invariantWatch{c: c, period: period, started: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			b, from, err := c.backupAny(3 * time.Second)
			if err != nil {
				continue // no leader right now (failover, partition): nothing to check
			}
			sum, v := checkBackup(b)
			w.mu.Lock()
			w.checks++
			for _, x := range v {
				w.violations = append(w.violations, fmt.Sprintf("backup via %s (version %d): %s", from, sum.Version, x))
			}
			w.mu.Unlock()
		}
	}()
	c.t.Cleanup(w.halt)
	return w
}

func (w *invariantWatch) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// finish stops the watch, runs one last check (which must find a leader)
// and fails the test on any violation seen.
func (w *invariantWatch) finish() quorum.Summary {
	c := w.c
	c.t.Helper()
	w.halt()
	var b []byte
	c.waitFor(15*time.Second, "a final backup from the leader", func() (bool, string) {
		var err error
		b, _, err = c.backupAny(5 * time.Second)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	sum, v := checkBackup(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checks++
	w.violations = append(w.violations, v...)
	for _, x := range w.violations {
		c.t.Errorf("invariant violation: %s", x)
	}
	c.t.Logf("invariant checker: %d backups checked, 0 violations expected, %d found; final state version %d, %d allocations, %d nodes",
		w.checks, len(w.violations), sum.Version, sum.Allocations, sum.Nodes)
	if ran := time.Since(w.started); ran > 4*w.period && w.checks < 2 {
		c.t.Errorf("the invariant checker ran only %d times in %s", w.checks, ran.Round(time.Millisecond))
	}
	return sum
}

// --- state comparison ------------------------------------------------------------------

// diffStates compares two committed states read from backups: the id
// counter, vClusters, tenants, members, allocations and nodes. Node records
// are compared without their modify version, which an agent's
// re-registration with a new leader bumps without changing the node.
func diffStates(a, b *quorum.State) []string {
	var d []string
	if a.NextID != b.NextID {
		d = append(d, fmt.Sprintf("next id %d vs %d", a.NextID, b.NextID))
	}
	if !reflect.DeepEqual(a.VClusters(), b.VClusters()) {
		d = append(d, "vclusters differ")
	}
	if !reflect.DeepEqual(a.Tenants(), b.Tenants()) {
		d = append(d, "tenants differ")
	}
	if !reflect.DeepEqual(a.Members(), b.Members()) {
		d = append(d, fmt.Sprintf("members differ: %v vs %v", a.Members(), b.Members()))
	}
	aa, ba := a.Allocations(), b.Allocations()
	if len(aa) != len(ba) {
		d = append(d, fmt.Sprintf("%d allocations vs %d", len(aa), len(ba)))
	} else {
		for i := range aa {
			if !reflect.DeepEqual(aa[i], ba[i]) {
				d = append(d, fmt.Sprintf("allocation %d differs:\n%+v\n%+v", aa[i].ID, aa[i], ba[i]))
			}
		}
	}
	an, bn := a.Nodes(), b.Nodes()
	if len(an) != len(bn) {
		d = append(d, fmt.Sprintf("%d nodes vs %d", len(an), len(bn)))
	} else {
		for i := range an {
			x, y := *an[i], *bn[i]
			x.ModifyVersion, y.ModifyVersion = 0, 0
			if !reflect.DeepEqual(x, y) {
				d = append(d, fmt.Sprintf("node %s differs:\n%+v\n%+v", x.Name, x, y))
			}
		}
	}
	return d
}

func readState(t *testing.T, b []byte) *quorum.State {
	t.Helper()
	st, err := quorum.ReadSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("read backup: %v", err)
	}
	return st
}
