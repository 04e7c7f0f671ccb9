package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// A MUNGE site (issue 29): a real munged with its own key and socket, two
// Unix accounts made for the test, a member that checks MUNGE credentials
// through that munged and has no tokens file. The users submit, list and
// cancel with no token anywhere, each sees only their tenant's work, a
// replayed credential and a uid that is no user are refused.

// testMunged runs a munged of the test's own (key, socket, pid, log and
// seed files in a temp dir readable by the test users) and returns its
// socket; it is killed by PID at cleanup.
func testMunged(t *testing.T) string {
	t.Helper()
	ensureTools(t, "munge")
	dir, err := os.MkdirTemp("", "lattice-munge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the users reach the socket
		t.Fatal(err)
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "munge.sock")
	pidFile := filepath.Join(dir, "munged.pid")
	out, err := exec.Command("munged", "--socket="+sock, "--key-file="+filepath.Join(dir, "munge.key"), "--pid-file="+pidFile,
		"--log-file="+filepath.Join(dir, "munged.log"), "--seed-file="+filepath.Join(dir, "munged.seed"), "--force").CombinedOutput()
	if err != nil {
		t.Skipf("munged does not start here: %v\n%s", err, out)
	}
	var pid int
	for range 100 {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid <= 0 {
		t.Fatalf("munged wrote no pid file %s", pidFile)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGTERM) })
	return sock
}

// testUser is a Unix account made for the test (useradd), removed at
// cleanup.
type testUser struct {
	name     string
	uid, gid int
}

func addTestUser(t *testing.T, prefix string) testUser {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/bin/sh", "--user-group", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create the test user %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v\n%s", name, err, out)
		}
	})
	id := func(flag string) int {
		out, err := exec.Command("id", flag, name).Output()
		if err != nil {
			t.Fatalf("id %s %s: %v", flag, name, err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n
	}
	return testUser{name: name, uid: id("-u"), gid: id("-g")}
}

// mungeSite is one member checking MUNGE through the test's munged, and a
// latticectl every user may run.
type mungeSite struct {
	t      *testing.T
	dir    string
	api    string
	socket string
	ctl    string // latticectl, in a directory every user can read
}

// run runs latticectl as u (nil = root) with MUNGE and no token anywhere:
// no config directory, no LATTICE_TOKEN.
func (s *mungeSite) run(u *testUser, args ...string) (string, string, int) {
	s.t.Helper()
	cmd := exec.Command(s.ctl, append([]string{"--server", s.api}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LATTICE_MUNGE_SOCKET=" + s.socket, "LATTICE_RETRY_BUDGET=20s"}
	cmd.Dir = "/"
	if u != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		s.t.Fatalf("latticectl: %v", err)
	}
	return o.String(), e.String(), code
}

func (s *mungeSite) must(u *testUser, args ...string) string {
	s.t.Helper()
	out, errOut, code := s.run(u, args...)
	if code != 0 {
		who := "root"
		if u != nil {
			who = u.name
		}
		s.t.Fatalf("latticectl %s (as %s): exit %d\n%s%s", strings.Join(args, " "), who, code, out, errOut)
	}
	return out
}

func TestMungeUsers(t *testing.T) {
	skipShort(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: it creates Unix users and runs latticectl as them")
	}
	sock := testMunged(t)
	alice, bob := addTestUser(t, "lta"), addTestUser(t, "ltb")

	dir := t.TempDir()
	binDir, err := os.MkdirTemp("", "lattice-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	_ = os.Chmod(binDir, 0o755)
	ctlBin := filepath.Join(binDir, "latticectl")
	if b, err := os.ReadFile(buildLatticectl(t)); err != nil || os.WriteFile(ctlBin, b, 0o755) != nil {
		t.Fatalf("copy latticectl: %v", err)
	}
	api := freeAddr(t)
	srvLog := filepath.Join(dir, "server.log")
	srv := startProc(t, srvLog, "server", "--log-level", "info", "server", "--id", "m1", "--data-dir", filepath.Join(dir, "m1"),
		"--bootstrap", "--api-addr", api, "--raft-addr", freeAddr(t), "--metrics-addr", "", "--munge-socket", sock,
		"--tenants", "physics,bio", "--vclusters", "hpc-batch")
	t.Cleanup(func() {
		srv.kill()
		if t.Failed() {
			t.Logf("--- server log ---\n%s", tail(srvLog, 80))
		}
	})
	s := &mungeSite{t: t, dir: dir, api: api, socket: sock, ctl: ctlBin}

	// Root is an admin over MUNGE (like Slurm's root): it makes an agent
	// token through the API and adds the two users.
	waitUntil(t, 30*time.Second, "the member to answer root over MUNGE", func() bool {
		_, _, code := s.run(nil, "whoami")
		return code == 0
	})
	if out := s.must(nil, "whoami"); !strings.Contains(out, "admin") || !strings.Contains(out, "munge") {
		t.Errorf("root's whoami: %s", out)
	}
	agentToken := strings.TrimSpace(s.must(nil, "token", "create", "rack1", "--role", "agent", "--nodes", "*"))
	agLog := filepath.Join(dir, "agent.log")
	ag := startProc(t, agLog, "agent", "--log-level", "info", "agent", "--id", "rack1", "--data-dir", filepath.Join(dir, "agent"),
		"--simulate", "2", "--server", api, "--heartbeat", "1s", "--grace", "1s", "--token", agentToken)
	t.Cleanup(func() { ag.stop(5 * time.Second) })

	// An unknown uid is refused with the command that would add it.
	_, errOut, code := s.run(&alice, "status")
	want := fmt.Sprintf("latticectl user add %s --uid %d --tenants TENANT", alice.name, alice.uid)
	if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "MUNGE credential for uid") {
		t.Fatalf("a uid that is no user: exit %d, stderr %q; want the command %q and the credential tried", code, errOut, want)
	}
	s.must(nil, "user", "add", alice.name, "--uid", fmt.Sprint(alice.uid), "--tenants", "physics")
	s.must(nil, "user", "add", bob.name, "--uid", fmt.Sprint(bob.uid), "--tenants", "bio", "--role", "user")
	if out := s.must(nil, "user", "list"); !strings.Contains(out, alice.name) || !strings.Contains(out, bob.name) {
		t.Errorf("user list: %s", out)
	}
	if out := s.must(&alice, "whoami"); !strings.Contains(out, alice.name) || !strings.Contains(out, "physics") {
		t.Errorf("alice's whoami: %s", out)
	}

	// Each submits with no token and no --tenant: their default tenant.
	waitUntil(t, 30*time.Second, "the agent's nodes", func() bool {
		out, _, _ := s.run(nil, "nodes", "-o", "json")
		return strings.Count(out, `"name"`) >= 2
	})
	aID := strings.TrimSpace(s.must(&alice, "submit", "--parsable", "-t", "10", "--", "sleep", "300"))
	bID := strings.TrimSpace(s.must(&bob, "submit", "--parsable", "-t", "10", "--", "sleep", "300"))
	seen := func(u *testUser) map[string]string {
		var v []map[string]any
		out := s.must(u, "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("status -o json: %v\n%s", err, out)
		}
		got := map[string]string{}
		for _, a := range v {
			got[fmt.Sprint(a["id"])] = fmt.Sprint(a["tenant"])
		}
		return got
	}
	if got := seen(&alice); len(got) != 1 || got[aID] != "physics" {
		t.Errorf("alice sees %v, want only %s in physics", got, aID)
	}
	if got := seen(&bob); len(got) != 1 || got[bID] != "bio" {
		t.Errorf("bob sees %v, want only %s in bio", got, bID)
	}
	// --tenant names only an associated tenant; the refusal lists them.
	if _, errOut, code := s.run(&alice, "submit", "--tenant", "bio", "--", "true"); code == 0 || !strings.Contains(errOut, "may use tenant(s) physics") {
		t.Errorf("alice submitting to bio: exit %d %q", code, errOut)
	}
	if _, errOut, code := s.run(&bob, "cancel", aID); code == 0 && !strings.Contains(errOut, "permission denied") {
		t.Errorf("bob cancelled alice's job: exit %d %q", code, errOut)
	}
	s.must(&alice, "cancel", aID)
	s.must(&bob, "cancel", bID)
	waitUntil(t, 30*time.Second, "both cancelled", func() bool {
		a, _, _ := s.run(nil, "show", aID, "-o", "json")
		b, _, _ := s.run(nil, "show", bID, "-o", "json")
		return strings.Contains(a, "CANCELLED") && strings.Contains(b, "CANCELLED")
	})

	// Alice's credential, replayed (by bob, or anyone who saw it), is
	// refused: the member remembers it until it expires.
	cmd := exec.Command("munge", "-n", "-S", sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(alice.uid), Gid: uint32(alice.gid)}}
	credOut, err := cmd.Output()
	if err != nil {
		t.Fatalf("munge -n as %s: %v", alice.name, err)
	}
	conn, err := grpc.NewClient(api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "MUNGE "+strings.TrimSpace(string(credOut)))
		_, err := latticev1.NewAccountServiceClient(conn).WhoAmI(ctx, &latticev1.AccountWhoAmIRequest{})
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("alice's fresh credential: %v", err)
	}
	if err := call(); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "replayed") {
		t.Errorf("alice's credential replayed: %v, want Unauthenticated naming a replay", err)
	}

	// Admins manage users: modify, delete; a tenant with work stays.
	s.must(nil, "user", "modify", bob.name, "--add-tenants", "physics", "--default-tenant", "physics")
	if out := s.must(&bob, "whoami", "-o", "json"); !strings.Contains(out, `"default_tenant": "physics"`) {
		t.Errorf("bob after modify: %s", out)
	}
	if _, errOut, code := s.run(&alice, "user", "delete", bob.name); code == 0 || !strings.Contains(errOut, "only an admin may") {
		t.Errorf("alice deleting bob: exit %d %q", code, errOut)
	}
	held := strings.TrimSpace(s.must(&bob, "submit", "--parsable", "--tenant", "bio", "--hold", "--", "true"))
	if _, errOut, code := s.run(nil, "tenant", "delete", "bio"); code == 0 || !strings.Contains(errOut, "pending or running") {
		t.Errorf("deleting a tenant with work: exit %d %q", code, errOut)
	}
	s.must(&bob, "cancel", held)
	waitUntil(t, 20*time.Second, "the held job cancelled", func() bool {
		_, _, code := s.run(nil, "tenant", "delete", "bio")
		return code == 0
	})
	s.must(nil, "user", "delete", bob.name)
	if _, errOut, code := s.run(&bob, "status"); code == 0 || !strings.Contains(errOut, "is not a Lattice user") {
		t.Errorf("bob after delete: exit %d %q", code, errOut)
	}
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
