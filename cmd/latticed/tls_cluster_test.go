package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/pki"
)

// TestClusterOverTLS: `latticed ca init` makes a CA with member and client
// certificates; three members form a quorum with the API and Raft over
// TLS (the joins go over TLS too), an agent runs jobs over TLS, latticectl
// works with --cacert and a token or with a client certificate mapped by
// `latticed token create --cn`, and says what is wrong without the CA or
// with an unmapped certificate.
func TestClusterOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newCluster(t)
	pkiDir := filepath.Join(c.dir, "pki")
	latticed := func(args ...string) (string, int) {
		cmd := exec.Command(latticedBin, args...)
		cmd.Env = childEnv()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := latticed("ca", "init", "--dir", pkiDir, "--members", "s1,s2,s3", "--clients", "alice,mallory"); code != 0 {
		t.Fatalf("ca init: exit %d: %s", code, out)
	}
	for _, f := range []string{"ca.crt", "ca.key", "s1.crt", "s3.key", "alice.crt", "alice.key"} {
		if _, err := os.Stat(filepath.Join(pkiDir, f)); err != nil {
			t.Fatalf("ca init made no %s: %v", f, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(pkiDir, "ca.key")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("the CA key is %v, want 0600", fi.Mode().Perm())
	}
	c.tlsDir = pkiDir
	c.startMembers(3)
	c.startAgent(4, 4)
	if out, code := latticed("token", "create", "--tokens-file", c.tokensFile, "--cn", "alice", "--tenant", "t", "alice"); code != 0 {
		t.Fatalf("token create --cn: exit %d: %s", code, out)
	}

	ca := filepath.Join(pkiDir, pki.CAFile)
	servers := strings.Join(c.apiAddrs(), ",")
	ctl := func(env []string, args ...string) (string, int) {
		cmd := exec.Command(buildLatticectl(t), append([]string{"--server", servers, "--retry-budget", "2s"}, args...)...)
		cmd.Env = append(append(childEnv(), "XDG_CONFIG_HOME="+filepath.Join(c.dir, "noconfig")), env...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	admin := []string{"LATTICE_CACERT=" + ca, "LATTICE_TOKEN=" + c.adminToken}
	if out, code := ctl(admin, "submit", "--tenant", "t", "--nodes", "1", "--walltime", "1m", "--", "echo", "over-tls"); code != 0 {
		t.Fatalf("submit with --cacert and a token: exit %d: %s", code, out)
	}
	alice := []string{"LATTICE_CACERT=" + ca, "LATTICE_CERT=" + filepath.Join(pkiDir, "alice.crt"), "LATTICE_KEY=" + filepath.Join(pkiDir, "alice.key")}
	c.waitFor(10*time.Second, "alice's certificate accepted (tokens file reloaded)", func() (bool, string) {
		out, code := ctl(alice, "submit", "--tenant", "t", "--name", "alices", "--nodes", "1", "--walltime", "1m", "--", "true")
		return code == 0, out
	})
	out, code := ctl(alice, "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"alices"`) || strings.Contains(out, "over-tls") {
		t.Fatalf("alice's status shows her job and not the admin's: exit %d: %s", code, out)
	}
	mallory := []string{"LATTICE_CACERT=" + ca, "LATTICE_CERT=" + filepath.Join(pkiDir, "mallory.crt"), "LATTICE_KEY=" + filepath.Join(pkiDir, "mallory.key")}
	if out, code := ctl(mallory, "status"); code != 1 || !strings.Contains(out, `client certificate "mallory" is not in this member's tokens file`) {
		t.Fatalf("an unmapped certificate: exit %d: %s", code, out)
	}
	if out, code := ctl([]string{"LATTICE_TOKEN=" + c.adminToken}, "status"); code != 75 || !strings.Contains(out, "--cacert") {
		t.Fatalf("without the CA: exit %d: %s", code, out)
	}
	// A member credential is enough to join: s4 has a member certificate
	// of the CA and no token. A process with a client certificate cannot
	// even start as a member.
	if out, code := latticed("ca", "init", "--dir", pkiDir, "--members", "s4"); code != 0 {
		t.Fatalf("ca init s4: exit %d: %s", code, out)
	}
	memberArgs := func(id, cert string) []string {
		return append([]string{"--log-level", "info", "server", "--id", id, "--data-dir", filepath.Join(c.dir, id),
			"--raft-addr", freeAddr(t), "--api-addr", freeAddr(t), "--tokens-file", c.tokensFile,
			"--tls-ca", ca, "--tls-cert", filepath.Join(pkiDir, cert+".crt"), "--tls-key", filepath.Join(pkiDir, cert+".key"),
			"--join", servers}, serverFlags...)
	}
	c.logs = append(c.logs, filepath.Join(c.dir, "s4.log"))
	c.track(startProc(t, filepath.Join(c.dir, "s4.log"), "s4", memberArgs("s4", "s4")...))
	c.waitFor(30*time.Second, "s4 joined with its member certificate", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := c.members[0].admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(st.Members) == 4, describeStatus(st)
	})
	cmd := exec.Command(latticedBin, memberArgs("evil", "alice")...)
	cmd.Env = childEnv()
	evilOut, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(evilOut), "not a member certificate") {
		t.Fatalf("a member with a client certificate: %v: %s", err, evilOut)
	}

	// The agent, over TLS, runs the jobs.
	c.waitFor(30*time.Second, "the jobs completed", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		l, err := c.members[0].allocs.List(ctx, &latticev1.ListAllocationsRequest{})
		if err != nil {
			return false, err.Error()
		}
		done := 0
		for _, a := range l.Allocations {
			if a.State == "COMPLETED" {
				done++
			}
		}
		return done == 2, "not yet"
	})
}
