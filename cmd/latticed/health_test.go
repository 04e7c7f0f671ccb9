package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// readyz GETs a member's /readyz: its status code and body.
func readyz(metrics string) (int, string) {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + metrics + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *cluster) waitReadyz(metrics string, code int, contains string, timeout time.Duration) {
	c.t.Helper()
	c.waitFor(timeout, fmt.Sprintf("/readyz of %s to answer %d %q", metrics, code, contains), func() (bool, string) {
		got, body := readyz(metrics)
		return got == code && strings.Contains(body, contains), fmt.Sprintf("%d %s", got, body)
	})
}

// TestReadyzAndQuorumHealth: /readyz is false on a member without a leader
// and true once it has joined and caught up; a follower that cannot write
// its log (disk full) is neither ready nor healthy in `quorum status`
// although it still hears the leader, and is both again once it can write
// and has caught up; a member cut off from the majority is not ready.
func TestReadyzAndQuorumHealth(t *testing.T) {
	skipShort(t)
	c := newCluster(t)
	m1, m2, m3 := freeAddr(t), freeAddr(t), freeAddr(t)
	s1 := c.addMember("s1", "--bootstrap", "--metrics-addr", m1)
	c.waitReadyz(m1, 200, "ready", 20*time.Second)

	// s2 asks a member that does not exist: it runs, but knows no leader.
	s2 := c.addMember("s2", "--join", freeAddr(t), "--metrics-addr", m2)
	c.waitReadyz(m2, 503, "no leader", 20*time.Second)
	for range 10 {
		if code, body := readyz(m2); code != 503 {
			t.Fatalf("a member without a leader answered /readyz %d: %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Restarted with the real join address it joins, catches up: ready.
	s2.proc().stop(10 * time.Second)
	s2.role = []string{"--join", s1.apiAddr, "--metrics-addr", m2}
	c.start(s2)
	c.waitReadyz(m2, 200, "ready", 30*time.Second)
	s3 := c.addMember("s3", "--join", s1.apiAddr+","+s2.apiAddr, "--metrics-addr", m3)
	c.waitReadyz(m3, 200, "ready", 30*time.Second)
	c.waitHealthy(3, 30*time.Second)

	// s3's disk is full: writes fail, heartbeats still arrive.
	l := c.mustLeader(10 * time.Second)
	if l == s3 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s3.admin.QuorumTransferLeadership(ctx, &latticev1.QuorumTransferRequest{Id: "s1"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		l = c.mustLeader(10 * time.Second)
	}
	full := true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := s3.admin.InjectFault(ctx, &latticev1.InjectFaultRequest{DiskFull: &full}); err != nil {
		t.Fatal(err)
	}
	cancel()
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := l.allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
			Name: fmt.Sprintf("w%d", i), Tenant: "t", NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, WorkDir: c.dir}})
		cancel()
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	c.waitReadyz(m3, 503, "cannot persist", 10*time.Second)
	var st *latticev1.QuorumStatusResponse
	c.waitFor(15*time.Second, "quorum status to call s3 unhealthy and far behind", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		st, err = l.admin.QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.Id == "s3" {
				return !m.Healthy && m.Problem != "" && m.Lag >= 150 && m.Role == "follower", fmt.Sprintf("%+v", m)
			}
		}
		return false, "no s3"
	})
	t.Logf("with a full disk: %s", describeStatus(st))
	for _, m := range st.Members {
		if m.Id == "s3" {
			t.Logf("s3: role %s, healthy %v, lag %d, problem %q", m.Role, m.Healthy, m.Lag, m.Problem)
		}
	}

	// It can write again: it catches up and is ready and healthy.
	full = false
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := s3.admin.InjectFault(ctx, &latticev1.InjectFaultRequest{DiskFull: &full}); err != nil {
		t.Fatal(err)
	}
	cancel()
	c.waitReadyz(m3, 200, "ready", 30*time.Second)
	c.waitHealthy(3, 30*time.Second)

	// Alone, s3 knows no leader: not ready.
	s1.proc().kill()
	s2.proc().kill()
	c.waitReadyz(m3, 503, "no leader", 20*time.Second)
}
