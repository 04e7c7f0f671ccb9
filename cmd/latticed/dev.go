package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/model"
)

// waitReady waits until the API answers, the agent is connected and every
// simulated node is up: Ready, or Draining/Drained as an administrator
// left it (a drain survives a restart and must not hold the start back).
// After limit it stops waiting and says which nodes are not up; the
// cluster serves anyway.
func waitReady(ctx context.Context, addr, token string, nodes int, creds grpc.DialOption, connected func() bool, limit time.Duration) error {
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := latticev1.NewNodeServiceClient(conn)
	deadline := time.Now().Add(limit)
	var notUp []string
	for {
		cctx, cancel := context.WithTimeout(withBearer(ctx, token), time.Second)
		resp, err := client.List(cctx, &latticev1.ListNodesRequest{})
		cancel()
		if err == nil {
			notUp = notUp[:0]
			for _, n := range resp.Nodes {
				switch model.NodeState(n.State) {
				case model.NodeReady, model.NodeDraining, model.NodeDrained:
				default:
					notUp = append(notUp, n.Name)
				}
			}
			if len(resp.Nodes) >= nodes && len(notUp) == 0 && connected() {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the dev cluster's API did not answer within %s: %w", limit, err)
			}
			fmt.Fprintf(os.Stderr, "lattice dev: %d node(s) not up after %s (%s); serving anyway\n", len(notUp), limit, model.CompressHostlist(notUp))
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// submitDemo submits a small sample workload so a newcomer sees jobs run.
// It is submitted once per data dir: a restart with the same command (and
// --demo) finds DATA_DIR/demo-submitted and says so instead.
func submitDemo(ctx context.Context, addr, token string, creds grpc.DialOption, dataDir string) error {
	marker := filepath.Join(dataDir, demoMarker)
	if b, err := os.ReadFile(marker); err == nil {
		fmt.Fprintf(os.Stderr, "lattice dev: the demo was submitted at the first start of this data dir (%s); not again (delete %s to submit it again)\n",
			strings.TrimSpace(string(b)), marker)
		return nil
	}
	ctx = withBearer(ctx, token)
	conn, err := grpc.NewClient(addr, creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := latticev1.NewAllocationServiceClient(conn)
	wd, _ := os.Getwd()
	demo := []*latticev1.AllocationRequest{
		{Name: "hello", NodesMin: 1, WalltimeSeconds: 300, Command: []string{"echo hello from $LATTICE_NODELIST; sleep 5"}},
		{Name: "two-nodes", NodesMin: 2, WalltimeSeconds: 300, Command: []string{"echo $SLURM_NNODES nodes: $SLURM_JOB_NODELIST; sleep 20"}},
		{Name: "wide", NodesMin: 16, WalltimeSeconds: 600, Command: []string{"echo 16-node job on $SLURM_JOB_NODELIST; sleep 30"}},
		{Name: "sweep", NodesMin: 1, WalltimeSeconds: 300, Array: &latticev1.ArraySpec{Start: 0, End: 7, Step: 1, MaxConcurrent: 4},
			Command: []string{"echo task $SLURM_ARRAY_TASK_ID; sleep 10"}},
		{Name: "training", Vcluster: "ml-training", NodesMin: 4, WalltimeSeconds: 900, PriorityClass: 5, Checkpoint: "signal",
			Command: []string{"echo training on $LATTICE_NUM_NODES nodes; sleep 45"}},
		{Name: "fails", NodesMin: 1, WalltimeSeconds: 60, Command: []string{"echo about to fail >&2; exit 3"}},
	}
	var ids []string
	for _, r := range demo {
		r.Tenant, r.WorkDir = "demo", wd
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		// A request id per demo job: a retry (or a crash between the
		// submissions and the marker) never submits one twice.
		rid := "lattice-dev-demo-" + r.Name
		resp, err := client.Submit(cctx, &latticev1.SubmitRequest{Request: r, ClientRequestId: rid})
		cancel()
		if err != nil {
			// A vCluster named in the demo may not exist with custom --vclusters.
			r.Vcluster = ""
			cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			resp, err = client.Submit(cctx, &latticev1.SubmitRequest{Request: r, ClientRequestId: rid + "-default-vcluster"})
			cancel()
			if err != nil {
				return fmt.Errorf("submit %s: %w", r.Name, err)
			}
		}
		ids = append(ids, fmt.Sprintf("%s=%s", r.Name, resp.DisplayId))
	}
	fmt.Fprintf(os.Stderr, "lattice dev: demo submitted %v\n", ids)
	if err := os.WriteFile(marker, []byte(strings.Join(ids, " ")+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the demo's submission: %w", err)
	}
	return nil
}

// demoMarker, in the data dir, records that the demo was submitted.
const demoMarker = "demo-submitted"

// devHint is what to type in another shell: latticectl, told the address
// of this dev cluster's API when it is not latticectl's default.
func devHint(api string) string {
	if api == latticecli.DefaultServer {
		return "latticectl status; latticectl nodes --summary"
	}
	return fmt.Sprintf("export LATTICE_SERVER=%s; latticectl status; latticectl nodes --summary", api)
}
