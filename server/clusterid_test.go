package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// lone starts a one-member cluster of its own (in memory) for a test.
func lone(t *testing.T) (*Server, *grpc.ClientConn) {
	t.Helper()
	srv, err := New(Config{ID: "dev", DataDir: filepath.Join(t.TempDir(), "quorum"), APIAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", InMemRaft: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RaftLogLevel: "off", DefaultVCluster: "hpc-batch", KillGrace: 2 * time.Second,
		VClusters: []model.VCluster{DefaultVCluster("hpc-batch")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn
}

// Every cluster names itself once, and an agent serves only the cluster
// it first learned: a real agent listing a member of its cluster and, at
// another listed address, the server of another cluster runs its job on
// its own cluster; when its cluster's server is gone it refuses the other
// (no node of it registered there, nothing of its job touched).
func TestAgentNeverFollowsAServerOfAnotherCluster(t *testing.T) {
	mine, mineConn := lone(t)
	other, otherConn := lone(t)
	ids := map[string]string{}
	for name, conn := range map[string]*grpc.ClientConn{"mine": mineConn, "other": otherConn} {
		waitFor(t, 20*time.Second, name+"'s cluster id", func() bool {
			st, err := latticev1.NewAdminServiceClient(conn).QuorumStatus(context.Background(), &latticev1.QuorumStatusRequest{})
			if err == nil && quorum.CheckClusterID(st.ClusterId) == nil {
				ids[name] = st.ClusterId
				return true
			}
			return false
		})
	}
	if ids["mine"] == ids["other"] {
		t.Fatalf("two clusters named alike: %s", ids["mine"])
	}

	dir := filepath.Join(t.TempDir(), "agent")
	log := &syncBuffer{}
	cmd := exec.Command(latticedBinary(t), "agent", "--server", mine.APIAddr()+","+other.APIAddr(), "--id", "a1", "--data-dir", dir,
		"--heartbeat", "500ms", "--grace", "2s", "--simulate", "1", "--vcluster", "hpc-batch")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		killTagged(dir)
	})
	allocs := latticev1.NewAllocationServiceClient(mineConn)
	id := submitScript(t, allocs, 1, "#!/bin/sh\nsleep 300\n")
	waitFor(t, 30*time.Second, "the job running", func() bool { return len(jobProcs([]string{dir})[id]) == 1 })
	if b, _ := exec.Command("cat", filepath.Join(dir, "cluster-id")).Output(); strings.TrimSpace(string(b)) != ids["mine"] {
		t.Fatalf("the agent learned cluster id %q, want %s", b, ids["mine"])
	}
	mine.Stop()
	// The other cluster's server refuses the agent's hello (it names the
	// cluster it serves); were it older, the agent would refuse it.
	waitFor(t, 30*time.Second, "the other cluster's server refusing the agent", func() bool {
		return strings.Contains(log.String(), "this server belongs to cluster "+ids["other"])
	})
	time.Sleep(8 * time.Second) // whatever it would do with the other server, it does now (5 refusals of a credential end an agent)
	n, err := latticev1.NewNodeServiceClient(otherConn).List(context.Background(), &latticev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Nodes) != 0 {
		t.Errorf("the other cluster registered the agent's nodes: %v", n.Nodes)
	}
	if len(jobProcs([]string{dir})[id]) != 1 {
		t.Error("the job's process is gone: the agent obeyed the other cluster")
	}
	// A refusal of this kind is not one of its credential: it does not give up.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err != nil || strings.Contains(string(stat), ") Z ") {
		t.Errorf("the agent ended after the other cluster refused it:\n%s", log.String())
	}
	if strings.Contains(log.String(), `msg="agent connected" server=`+other.APIAddr()) {
		t.Errorf("the agent connected to the other cluster's server:\n%s", log.String())
	}
}
