package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latticehpc/lattice/agent"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// devStack is the dev stack in-process: a one-member quorum and a
// simulated agent, talking over real gRPC on loopback.
type devStack struct {
	srv    *Server
	conn   *grpc.ClientConn
	allocs latticev1.AllocationServiceClient
	nodes  latticev1.NodeServiceClient
	stop   func()
}

func startDev(t *testing.T, dir string, nodes int) *devStack {
	return startDevWith(t, dir, nodes, []string{"hpc-batch", "ml-training"}, nil)
}

// startDevWith starts a dev stack whose nodes are split evenly over the
// vClusters (one dragonfly group each); tune, when set, changes the
// server's configuration.
func startDevWith(t *testing.T, dir string, nodes int, vclusters []string, tune func(*Config)) *devStack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := Config{
		ID: "dev", DataDir: filepath.Join(dir, "quorum"), APIAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", InMemRaft: true, Logger: log, RaftLogLevel: "off",
		DefaultVCluster: vclusters[0], KillGrace: 2 * time.Second,
	}
	for _, name := range vclusters {
		cfg.VClusters = append(cfg.VClusters, DefaultVCluster(name))
	}
	if tune != nil {
		tune(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	simNodes, err := agent.SimulatedNodes("node", nodes, nodes/len(vclusters), vclusters, nil, 100, 400, "fp1")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{ID: "a1", Servers: []string{srv.APIAddr()}, DataDir: filepath.Join(dir, "agent"),
		Nodes: simNodes, HeartbeatInterval: time.Second, Grace: 2 * time.Second, Logger: log, Latticectl: devLatticectl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ag.Run(ctx)
	}()
	conn, err := grpc.NewClient(srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	d := &devStack{srv: srv, conn: conn, allocs: latticev1.NewAllocationServiceClient(conn), nodes: latticev1.NewNodeServiceClient(conn)}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		<-done
		srv.Stop()
	}
	t.Cleanup(d.stop)
	waitFor(t, 20*time.Second, "nodes ready", func() bool {
		r, err := d.nodes.List(context.Background(), &latticev1.ListNodesRequest{States: []string{"Ready"}})
		return err == nil && len(r.Nodes) == nodes
	})
	return d
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *devStack) submit(t *testing.T, r *latticev1.AllocationRequest) string {
	t.Helper()
	if r.WalltimeSeconds == 0 {
		r.WalltimeSeconds = 300
	}
	resp, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: r})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return resp.DisplayId
}

func (d *devStack) waitState(t *testing.T, id string, want model.AllocState) *latticev1.Allocation {
	t.Helper()
	var a *latticev1.Allocation
	waitFor(t, 30*time.Second, "allocation "+id+" "+string(want), func() bool {
		var err error
		a, err = d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: id})
		return err == nil && a.State == string(want)
	})
	return a
}

func (d *devStack) logs(t *testing.T, id string, stderr bool) string {
	t.Helper()
	stream, err := d.allocs.Logs(context.Background(), &latticev1.LogsRequest{Id: id, Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			return string(out)
		}
		if err != nil {
			t.Fatalf("logs %s: %v", id, err)
		}
		out = append(out, c.Data...)
	}
}

func TestDevStackEndToEnd(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 8)

	t.Run("two-node job completes with its output", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 2, Command: []string{"sh", "-c", "echo hello-$LATTICE_ALLOC_ID $SLURM_NNODES"}})
		a := d.waitState(t, id, model.StateCompleted)
		if len(a.Nodes) != 2 || !a.HasExitCode || a.ExitCode != 0 {
			t.Fatalf("nodes %v exit %v/%d", a.Nodes, a.HasExitCode, a.ExitCode)
		}
		if got := d.logs(t, id, false); got != "hello-"+id+" 2\n" {
			t.Fatalf("logs = %q", got)
		}
	})
	t.Run("exit 3 fails with exit code 3", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"echo oops >&2; exit 3"}})
		a := d.waitState(t, id, model.StateFailed)
		if !a.HasExitCode || a.ExitCode != 3 || a.Reason != model.ReasonNonZeroExit {
			t.Fatalf("exit %d reason %s", a.ExitCode, a.Reason)
		}
		if got := d.logs(t, id, true); got != "oops\n" {
			t.Fatalf("stderr = %q", got)
		}
	})
	t.Run("cancelling a running job ends it", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"sleep", "300"}})
		d.waitState(t, id, model.StateRunning)
		resp, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{id, "999999"}})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Results[0].Cancelled || resp.Results[1].Cancelled || resp.Results[1].Error == "" {
			t.Fatalf("cancel results %+v", resp.Results)
		}
		a := d.waitState(t, id, model.StateCancelled)
		if a.Reason != model.ReasonCancelled {
			t.Fatalf("reason %s", a.Reason)
		}
	})
	t.Run("a job larger than its vcluster borrows", func(t *testing.T) {
		// Only checkpointable work runs on borrowed nodes (the default policy).
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 6, Command: []string{"true"}, Checkpoint: "signal"})
		a := d.waitState(t, id, model.StateCompleted)
		if len(a.Nodes) != 6 {
			t.Fatalf("nodes %v", a.Nodes)
		}
	})
	t.Run("array with a concurrency limit", func(t *testing.T) {
		id := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"echo $SLURM_ARRAY_TASK_ID"},
			Array: &latticev1.ArraySpec{Start: 0, End: 5, Step: 1, MaxConcurrent: 2}})
		for i := range 6 {
			d.waitState(t, id+"_"+strconv.Itoa(i), model.StateCompleted)
		}
		if got := d.logs(t, id+"_4", false); got != "4\n" {
			t.Fatalf("task 4 output %q", got)
		}
	})
	t.Run("invalid input names the field", func(t *testing.T) {
		_, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 0, Command: []string{"x"}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("code %v", status.Code(err))
		}
		_, err = d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, Vcluster: "nope", Command: []string{"x"}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unknown vcluster: code %v", status.Code(err))
		}
		_, err = d.allocs.Get(context.Background(), &latticev1.GetAllocationRequest{Id: "424242"})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("unknown id: code %v", status.Code(err))
		}
	})
	t.Run("retried submission is not duplicated", func(t *testing.T) {
		req := &latticev1.SubmitRequest{ClientRequestId: "retry-1", Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}}}
		a, err := d.allocs.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.allocs.Submit(context.Background(), req)
		if err != nil || b.DisplayId != a.DisplayId {
			t.Fatalf("retry gave %v, %v; first %s", b, err, a.DisplayId)
		}
	})

	t.Run("metrics include raft and scheduler series", func(t *testing.T) {
		resp, err := http.Get("http://" + d.srv.MetricsAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for _, want := range []string{"lattice_raft_commitTime", "lattice_raft_boltdb_storeLogs", "lattice_scheduler_cycle_duration_seconds_bucket",
			"lattice_quorum_commands_applied_total", `lattice_allocations{state="COMPLETED",vcluster=`, "lattice_dispatcher_agents_connected 1"} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	// Restart on the same data dir: everything committed is still there.
	var before *latticev1.ListAllocationsResponse
	waitFor(t, 30*time.Second, "every allocation to end", func() bool {
		var err error
		before, err = d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
		if err != nil {
			return false
		}
		for _, a := range before.Allocations {
			if st, _ := model.ParseAllocState(a.State); !st.Terminal() {
				return false
			}
		}
		return true
	})
	var violations []string
	d.srv.view(func(st *quorum.State) { violations = quorum.CheckInvariants(st) })
	if len(violations) > 0 {
		t.Fatalf("invariant violations: %v", violations)
	}
	d.stop()
	d2 := startDev(t, dir, 8)
	after, err := d2.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Allocations) != len(before.Allocations) {
		t.Fatalf("%d allocations after restart, %d before", len(after.Allocations), len(before.Allocations))
	}
	for i := range before.Allocations {
		if !proto.Equal(before.Allocations[i], after.Allocations[i]) {
			t.Fatalf("allocation %s changed across restart:\nbefore %v\nafter  %v", before.Allocations[i].DisplayId, before.Allocations[i], after.Allocations[i])
		}
	}
}

func TestBackupRestoreIntoFreshCluster(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, filepath.Join(dir, "old"), 4)
	var ids []string
	for i := range 3 {
		ids = append(ids, d.submit(t, &latticev1.AllocationRequest{Name: "j" + strconv.Itoa(i), NodesMin: 1, Command: []string{"true"}}))
	}
	for _, id := range ids {
		d.waitState(t, id, model.StateCompleted)
	}
	before, err := d.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := latticev1.NewAdminServiceClient(d.conn).Backup(context.Background(), &latticev1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var backup []byte
	for {
		c, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		backup = append(backup, c.Data...)
	}
	file := filepath.Join(dir, "backup.lattice")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBackup(file); err != nil {
		t.Fatalf("verify: %v", err)
	}
	d.stop()
	if err := StageRestore(file, filepath.Join(dir, "new", "quorum")); err != nil {
		t.Fatal(err)
	}
	d2 := startDev(t, filepath.Join(dir, "new"), 4)
	after, err := d2.allocs.List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Allocations) != len(before.Allocations) {
		t.Fatalf("restored %d allocations, backed up %d", len(after.Allocations), len(before.Allocations))
	}
	for i := range before.Allocations {
		if !proto.Equal(before.Allocations[i], after.Allocations[i]) {
			t.Fatalf("allocation %s differs after restore", before.Allocations[i].DisplayId)
		}
	}
	// The restored cluster keeps working and keeps numbering after the backup.
	id := d2.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}})
	if id != "4" {
		t.Fatalf("next id after restore = %s, want 4", id)
	}
	d2.waitState(t, id, model.StateCompleted)
}
