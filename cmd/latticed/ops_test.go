package main

// TestOperationsGuide runs the procedures of docs/operations.md, in order, on
// real processes started from the files in deploy/: install a three-member
// quorum and an agent from the shipped configs, take a backup through a
// follower, upgrade one member at a time, replace a lost member, add and
// remove a member, and restore the backup into a new cluster. Admin steps
// go through the real latticectl, as an operator would type them.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

var (
	latticectlOnce sync.Once
	latticectlBin  string
	latticectlErr  error
)

func buildLatticectl(t *testing.T) string {
	t.Helper()
	latticectlOnce.Do(func() {
		latticectlBin = filepath.Join(filepath.Dir(latticedBin), "latticectl")
		// latticectl-offline beside it: quorum verify and restore run there.
		out, err := exec.Command("go", "build", "-o", filepath.Dir(latticedBin)+"/", "../latticectl", "../latticectl-offline").CombinedOutput()
		if err != nil {
			latticectlErr = fmt.Errorf("build latticectl: %v\n%s", err, out)
		}
	})
	if latticectlErr != nil {
		t.Fatal(latticectlErr)
	}
	return latticectlBin
}

// ctl runs latticectl against servers and fails the test unless it exits 0.
func ctl(t *testing.T, servers []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(buildLatticectl(t), append([]string{"--server", strings.Join(servers, ",")}, args...)...)
	// Tenants must exist with auth on; the user name is no tenant here.
	cmd.Env = append(childEnv(), "LATTICE_TENANT=default")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("latticectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestOperationsGuide(t *testing.T) {
	skipShort(t)
	c := newCluster(t)
	metrics := map[string]string{}
	// Install: each member from its shipped config; only the machine
	// specific keys (data dir, addresses) are overridden on the command line.
	cfg := func(id string) []string {
		metrics[id] = freeAddr(t)
		return []string{"--config", deployPath("quorum", id+".yaml"), "--metrics-addr", metrics[id], "--http", "127.0.0.1:0"}
	}
	s1 := c.addMember("s1", cfg("s1")...)
	c.waitReadyz(metrics["s1"], 200, "ready", 20*time.Second)
	for _, id := range []string{"s2", "s3"} {
		c.addMember(id, append(cfg(id), "--join", strings.Join(c.apiAddrs(), ","))...)
	}
	c.waitHealthy(3, 30*time.Second)
	for id, m := range metrics {
		c.waitReadyz(m, 200, "ready", 20*time.Second)
		_ = id
	}
	// The agent from agent.yaml: 128 simulated nodes over three vClusters.
	agentLog := filepath.Join(c.dir, "agent.log")
	c.logs = append(c.logs, agentLog)
	c.agent = startProc(t, agentLog, "agent", "agent", "--config", deployPath("quorum", "agent.yaml"),
		"--server", strings.Join(c.apiAddrs(), ","), "--data-dir", filepath.Join(c.dir, "agent"), "--heartbeat", "1s", "--token", c.agentToken)
	c.track(c.agent)
	c.waitNodesReady(128, 30*time.Second)
	servers := c.apiAddrs()
	out := ctl(t, servers, "submit", "--nodes", "2", "--vcluster", "ml-training", "--parsable", "--", "sleep 0.2")
	first := strings.TrimSpace(out)
	c.waitFor(30*time.Second, "the first job to complete", func() (bool, string) {
		s := ctl(t, servers, "show", first, "-o", "json")
		return strings.Contains(s, `"state": "COMPLETED"`), s
	})

	// Backup through a follower (it relays from the leader), then verify.
	l := c.mustLeader(10 * time.Second)
	var follower *member
	for _, m := range c.alive() {
		if m != l {
			follower = m
			break
		}
	}
	backupFile := filepath.Join(c.dir, "lattice.backup")
	ctl(t, []string{follower.apiAddr}, "quorum", "backup", backupFile)
	ctl(t, servers, "quorum", "verify", backupFile)

	// Upgrade one member at a time, followers first, the leader last:
	// stop it, start it again (here: the same binary), wait until it is
	// ready and the quorum is healthy before the next one.
	order := []*member{}
	for _, m := range c.members {
		if m != l {
			order = append(order, m)
		}
	}
	order = append(order, l)
	for _, m := range order {
		if !m.proc().stop(15 * time.Second) {
			t.Fatalf("%s did not stop on SIGTERM", m.id)
		}
		c.start(m)
		c.waitReadyz(metrics[m.id], 200, "ready", 30*time.Second)
		c.waitHealthy(3, 30*time.Second)
	}
	ctl(t, servers, "submit", "--nodes", "1", "--parsable", "--", "true")

	// Replace a lost member: s3's machine and disk are gone.
	s3 := c.members[2]
	s3.proc().kill()
	if err := os.RemoveAll(s3.dataDir); err != nil {
		t.Fatal(err)
	}
	ctl(t, []string{s1.apiAddr, c.members[1].apiAddr}, "quorum", "remove", "s3")
	metrics["s4"] = freeAddr(t)
	s4 := c.addMember("s4", "--join", s1.apiAddr+","+c.members[1].apiAddr, "--metrics-addr", metrics["s4"])
	c.waitHealthy(3, 30*time.Second)
	c.waitReadyz(metrics["s4"], 200, "ready", 30*time.Second)

	// Add a fifth and remove it again.
	s5 := c.addMember("s5", "--join", s1.apiAddr+","+s4.apiAddr)
	c.waitHealthy(4, 30*time.Second)
	ctl(t, []string{s1.apiAddr, s4.apiAddr}, "quorum", "remove", "s5")
	s5.proc().stop(10 * time.Second)
	st := c.waitHealthy(3, 30*time.Second)
	t.Logf("after replace, add, remove: %s", describeStatus(st))

	// Restore the backup into a new cluster: stop everything, stage it in
	// an empty data dir, bootstrap that member; the job submitted before
	// the backup is there.
	c.agent.stop(10 * time.Second)
	for _, m := range c.alive() {
		m.proc().stop(10 * time.Second)
	}
	ctl(t, servers, "quorum", "restore", backupFile, "--data-dir", filepath.Join(c.dir, "r1"))
	rc := c.addMember("r1", "--bootstrap") // its data dir is c.dir/r1, where the backup is staged
	c.waitFor(30*time.Second, "the restored member to serve the backed-up job", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := rc.allocs.List(ctx, &latticev1.ListAllocationsRequest{})
		if err != nil {
			return false, err.Error()
		}
		for _, a := range resp.Allocations {
			if a.DisplayId == first && a.State == "COMPLETED" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocations", len(resp.Allocations))
	})
}
