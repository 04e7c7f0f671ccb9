package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hostNet is a network namespace joined to the test's by a veth pair: a
// "host" whose loss the test can cause without closing any socket (its
// link goes down: packets are dropped, nothing is reset).
type hostNet struct {
	ns, outer, inner string // namespace, veth ends
	outerIP, innerIP string
}

func runCmd(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// newHostNet makes the namespace, or skips the test saying why.
func newHostNet(t *testing.T) *hostNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a lost host is simulated with a network namespace: needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2) for a network namespace")
	}
	n := os.Getpid()%200 + 20
	h := &hostNet{ns: fmt.Sprintf("i24-host-%d", os.Getpid()), outer: fmt.Sprintf("i24o%d", n), inner: fmt.Sprintf("i24i%d", n),
		outerIP: fmt.Sprintf("10.224.%d.1", n), innerIP: fmt.Sprintf("10.224.%d.2", n)}
	if err := runCmd("ip", "netns", "add", h.ns); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = runCmd("ip", "link", "del", h.outer)
		_ = runCmd("ip", "netns", "del", h.ns)
	})
	for _, cmd := range [][]string{
		{"ip", "link", "add", h.outer, "type", "veth", "peer", "name", h.inner},
		{"ip", "link", "set", h.inner, "netns", h.ns},
		{"ip", "addr", "add", h.outerIP + "/24", "dev", h.outer},
		{"ip", "link", "set", h.outer, "up"},
		{"ip", "netns", "exec", h.ns, "ip", "addr", "add", h.innerIP + "/24", "dev", h.inner},
		{"ip", "netns", "exec", h.ns, "ip", "link", "set", h.inner, "up"},
		{"ip", "netns", "exec", h.ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := runCmd(cmd...); err != nil {
			t.Skipf("cannot wire a network namespace: %v", err)
		}
	}
	return h
}

// link takes the host's link down (lost) or up (back).
func (h *hostNet) link(t *testing.T, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	if err := runCmd("ip", "netns", "exec", h.ns, "ip", "link", "set", h.inner, state); err != nil {
		t.Fatal(err)
	}
	if err := runCmd("ip", "link", "set", h.outer, state); err != nil {
		t.Fatal(err)
	}
}

// addrOn returns a free address on ip (of the test's namespace).
func addrOn(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The leader's host is lost without closing its sockets (its network
// namespace's link goes down) while 16 jobs run on four agents, for longer
// than the node timeout and the agents' fence (incidentSettings): none is
// failed, killed or run twice, and every agent is on the new leader within
// 15 s.
func TestLeaderHostLossCostsNoRunningJob(t *testing.T) {
	h := newHostNet(t)
	losses := []time.Duration{15 * time.Second}
	if longTests() {
		losses = []time.Duration{30 * time.Second, 120 * time.Second, 400 * time.Second}
	}
	for _, loss := range losses {
		// One namespace for all: each run brings its link back up.
		t.Run(loss.String(), func(t *testing.T) { leaderHostLoss(t, h, loss) })
	}
}

func leaderHostLoss(t *testing.T, h *hostNet, loss time.Duration) {
	c := newCluster(t)
	agentFlags := incidentSettings(c)
	// s1 on the host that will be lost: it bootstraps, so it leads first.
	_, port, _ := net.SplitHostPort(freeAddr(t))
	_, rport, _ := net.SplitHostPort(freeAddr(t))
	// Raft beyond loopback without TLS must be authenticated: every member
	// proves the same cluster secret.
	secret := []string{"--cluster-secret", "host-loss-test-cluster-secret"}
	s1 := c.addMemberAt("s1", net.JoinHostPort(h.innerIP, rport), net.JoinHostPort(h.innerIP, port), h.ns, append([]string{"--bootstrap"}, secret...)...)
	c.waitFor(20*time.Second, "s1 to lead", func() (bool, string) {
		st, err := selfStatus(s1, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return st.Members[0].Role == "leader", "role " + st.Members[0].Role
	})
	for _, id := range []string{"s2", "s3"} {
		c.addMemberAt(id, addrOn(t, h.outerIP), addrOn(t, h.outerIP), "", append([]string{"--join", strings.Join(c.apiAddrs(), ",")}, secret...)...)
	}
	c.waitHealthy(3, 45*time.Second)
	f := c.startFleet(4, 4, agentFlags...)
	ids, groups := runJobs(c, f.dirs, 16, "#!/bin/sh\nsleep 3600\n")
	if l := c.mustLeader(10 * time.Second); l != s1 {
		t.Fatalf("%s leads, want s1 (on the host to lose)", l.id)
	}
	w := watchGroups(f.dirs, groups, nil)
	before, _ := f.connections(s1.apiAddr)
	start := time.Now()
	h.link(t, false)
	restored := false
	defer func() {
		if !restored {
			h.link(t, true)
		}
	}()
	moved := f.waitMoved(c, s1.apiAddr, before, start, 90*time.Second)
	t.Logf("every agent was on the new leader %s after the host was lost", moved.Round(100*time.Millisecond))
	if limit := 15 * time.Second; moved > limit {
		t.Errorf("the last agent reached the new leader %s after the host loss, want within %s", moved, limit)
	}
	time.Sleep(time.Until(start.Add(loss)))
	c.waitNodesReady(16, 30*time.Second) // on the new leader, before the host is back
	h.link(t, true)
	restored = true
	c.waitHealthy(3, 60*time.Second)
	time.Sleep(3 * time.Second)
	for _, p := range w.finish() {
		t.Error(p)
	}
	c.checkJobsRunning(ids)
}
