package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
)

// TestClusterMembershipNeedsAuthAndReachableMembers: against real
// processes with auth on, a `latticed server --join` without a credential
// is refused and never becomes a voter; an admin's two `quorum add` calls
// for made-up, unreachable members are refused and the quorum keeps
// serving; a user's token cannot add a voter.
func TestClusterMembershipNeedsAuthAndReachableMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t)
	c.startMembers(1)
	s1 := c.members[0]

	// A joiner without a token (its own API on loopback, so it starts).
	evilDir := filepath.Join(c.dir, "evil")
	evilLog := filepath.Join(c.dir, "evil.log")
	c.logs = append(c.logs, evilLog)
	evil := startProc(t, evilLog, "evil", "--log-level", "info", "server", "--id", "evil", "--data-dir", evilDir,
		"--raft-addr", freeAddr(t), "--api-addr", freeAddr(t), "--metrics-addr", "", "--join", s1.apiAddr)
	c.track(evil)
	c.waitFor(15*time.Second, "the unauthenticated join refused", func() (bool, string) {
		b, _ := os.ReadFile(evilLog)
		return strings.Contains(string(b), "Unauthenticated"), "no refusal logged yet"
	})
	st := c.waitHealthy(1, 10*time.Second)
	if len(st.Members) != 1 {
		t.Fatalf("the quorum has %d members after an unauthenticated join: %s", len(st.Members), describeStatus(st))
	}

	// Two made-up members, added by an admin: refused, quorum unharmed.
	for _, id := range []string{"ghost1", "ghost2"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s1.admin.QuorumJoin(ctx, &latticev1.QuorumJoinRequest{Id: id, RaftAddr: freeAddr(t), ApiAddr: freeAddr(t)})
		cancel()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("quorum add %s: %v, want FailedPrecondition naming it unreachable", id, err)
		}
	}
	c.waitHealthy(1, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s1.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: shortJob("after-ghosts", c.dir)}); err != nil {
		t.Fatalf("the quorum stopped serving after refused adds: %v", err)
	}

	// A user's token may not add a voter, even a reachable one.
	userTok := mintToken()
	if err := appendToken(c.tokensFile, userTok, userIdentity("mallory", "stream")); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s1.apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerCreds(userTok)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c.waitFor(10*time.Second, "the user token refused as a voter-adder", func() (bool, string) {
		_, err := latticev1.NewAdminServiceClient(conn).QuorumJoin(ctx, &latticev1.QuorumJoinRequest{Id: "m", RaftAddr: s1.raftAddr})
		return status.Code(err) == codes.PermissionDenied, status.Code(err).String()
	})
}

// userIdentity is a plain user of one tenant.
func userIdentity(user, tenant string) auth.Identity {
	return auth.Identity{User: user, Role: auth.RoleUser, Tenants: []string{tenant}, MaxPriority: -1}
}

// TestClusterRemoveKeepsAReachableMajority: with one of three members down,
// removing a live follower would leave two voters of which one is
// reachable, so it is refused and the quorum keeps serving; removing the
// dead one is accepted.
func TestClusterRemoveKeepsAReachableMajority(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t)
	c.startMembers(3)
	l := c.mustLeader(10 * time.Second)
	var followers []*member
	for _, m := range c.members {
		if m != l {
			followers = append(followers, m)
		}
	}
	dead, live := followers[0], followers[1]
	dead.proc().kill()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := l.admin.QuorumRemove(ctx, &latticev1.QuorumRemoveRequest{Id: live.id})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no majority") {
		t.Fatalf("removing live %s with %s down: %v, want FailedPrecondition (no majority)", live.id, dead.id, err)
	}
	if _, err := l.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: shortJob("still-serving", c.dir)}); err != nil {
		t.Fatalf("the quorum stopped serving: %v", err)
	}
	if _, err := l.admin.QuorumRemove(ctx, &latticev1.QuorumRemoveRequest{Id: dead.id}); err != nil {
		t.Fatalf("removing the dead member %s: %v", dead.id, err)
	}
}

// TestTokenCreate: `latticed token create` prints a token, appends only its
// hash to the tokens file (0600), and refuses bad input with exit 2.
func TestTokenCreate(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(latticedBin, append([]string{"token", "create", "--data-dir", dir}, args...)...)
		cmd.Env = childEnv()
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)), code
	}
	tok, code := run("--tenant", "physics", "--role", "user", "alice")
	if code != 0 || !strings.HasPrefix(tok, auth.TokenPrefix) {
		t.Fatalf("token create: %q, exit %d", tok, code)
	}
	path := filepath.Join(dir, "tokens")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file: %v %v", fi, err)
	}
	toks, err := readTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if id := toks.Authenticate(tok); id == nil || id.User != "alice" || !id.InTenant("physics") || strings.Contains(string(b), tok) {
		t.Fatalf("the file does not authenticate the printed token by its hash only:\n%s", b)
	}
	for _, bad := range [][]string{{"--role", "agent", "rack1"}, {"--role", "root", "x"}, {"--role", "user", "bob"}, {"--role", "admin"}} {
		if _, code := run(bad...); code != 2 {
			t.Errorf("token create %v: exit %d, want 2", bad, code)
		}
	}
}

// TestReadmeCommandsWithAuth: on a machine with no saved token, `latticed
// dev` turns auth on, saves an admin token in the user's config dir, and the
// README's latticectl commands work with nothing more; without that token
// they are refused; a restart reuses the saved token.
func TestReadmeCommandsWithAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "config")
	env := append(childEnv(), "XDG_CONFIG_HOME="+home) // the last one wins
	api, metrics := freeAddr(t), freeAddr(t)
	startDev := func() *proc {
		logPath := filepath.Join(dir, "dev.log")
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd := exec.Command(latticedBin, "dev", "--data-dir", filepath.Join(dir, "dev"), "--nodes", "4", "--groups", "1",
			"--api", api, "--metrics", metrics)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: "dev", logPath: logPath, cmd: cmd, done: make(chan struct{}), started: time.Now()}
		go func() { p.err = cmd.Wait(); close(p.done) }()
		t.Cleanup(func() { p.stop(10 * time.Second) })
		waitHTTP(t, "http://"+metrics+"/readyz", 30*time.Second, p)
		return p
	}
	ctlIn := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(buildLatticectl(t), append([]string{"--server", api}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	dev := startDev()
	if _, err := os.Stat(filepath.Join(home, "lattice", "token")); err != nil {
		t.Fatalf("dev saved no token: %v", err)
	}
	if out, code := ctlIn(env, "submit", "--nodes", "2", "--walltime", "5m", "--", "sh", "-c", "echo hello-$LATTICE_ALLOC_ID"); code != 0 {
		t.Fatalf("README submit: exit %d: %s", code, out)
	}
	if out, code := ctlIn(env, "status"); code != 0 || !strings.Contains(out, "sh") {
		t.Fatalf("README status: exit %d: %s", code, out)
	}
	other := append(childEnv(), "XDG_CONFIG_HOME="+filepath.Join(dir, "elsewhere"))
	if out, code := ctlIn(other, "status"); code != 1 || !strings.Contains(out, "no credential") {
		t.Fatalf("status without a token: exit %d: %s", code, out)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "dev", "tokens"))
	dev.stop(10 * time.Second)
	startDev()
	after, _ := os.ReadFile(filepath.Join(dir, "dev", "tokens"))
	if string(before) != string(after) {
		t.Fatalf("a restart changed the tokens file:\n%s\n---\n%s", before, after)
	}
	if out, code := ctlIn(env, "status"); code != 0 {
		t.Fatalf("status after a restart: exit %d: %s", code, out)
	}
}
