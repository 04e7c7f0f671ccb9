package server

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Heartbeat load of issue 3: 10,000 simulated nodes heartbeating every 10 s.
const (
	hbAgents   = 10
	hbNodes    = 1000 // per agent
	hbInterval = 10 * time.Second
	hbWindow   = 30 * time.Second // three heartbeat rounds
)

// BenchmarkLeaderHeartbeats10kNodes measures the leader's CPU for
// hbAgents × hbNodes simulated nodes heartbeating every hbInterval, and the
// Raft entries appended meanwhile (unchanged heartbeats must append none).
//
// The leader is a single member in this process (fsync on); the agents are
// separate `latticed agent --simulate` processes, so the CPU time of this
// process (getrusage RUSAGE_SELF, which excludes children) over the window
// is the leader's alone: gRPC streams, liveness, scheduler loops, Raft, GC.
// Each sub-benchmark takes about a minute and runs once whatever
// -benchtime says:
//
//	go test -run '^$' -bench LeaderHeartbeats -count 3 ./server/
func BenchmarkLeaderHeartbeats10kNodes(b *testing.B) {
	if testing.Short() {
		b.Skip("about a minute of wall time per sub-benchmark; not in -short")
	}
	bin := filepath.Join(b.TempDir(), "latticed")
	build := exec.Command("go", "build", "-o", bin, "github.com/latticehpc/lattice/cmd/latticed")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build latticed: %v\n%s", err, out)
	}
	// One vCluster, and the five of DESIGN.md: each vCluster adds a
	// scheduler loop to the idle leader.
	for _, vcs := range [][]string{{"hpc-batch"}, {"hpc-batch", "ml-training", "interactive", "service", "sensitive"}} {
		b.Run(fmt.Sprintf("vclusters=%d", len(vcs)), func(b *testing.B) { benchHeartbeats(b, bin, vcs) })
	}
}

func benchHeartbeats(b *testing.B, bin string, vclusters []string) {
	dir := b.TempDir()
	var defs []model.VCluster
	for _, name := range vclusters {
		defs = append(defs, DefaultVCluster(name))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := New(Config{ID: "hb", DataDir: filepath.Join(dir, "quorum"), APIAddr: "127.0.0.1:0", InMemRaft: true,
		Logger: log, RaftLogLevel: "off", VClusters: defs,
		// Liveness runs its full check from the start (default grace: 60 s).
		LivenessGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	benchWaitFor(b, 20*time.Second, "the member to lead", func() bool { return srv.currentLeader() != nil })

	for k := range hbAgents {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("agent%d.log", k)))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "agent", "--server", srv.APIAddr(), "--id", fmt.Sprintf("hb-agent-%d", k),
			"--simulate", strconv.Itoa(hbNodes), "--name", fmt.Sprintf("a%02d-", k), "--first-group", strconv.Itoa(k*hbNodes/16),
			"--vcluster", strings.Join(vclusters, ","), "--heartbeat", hbInterval.String(), "--data-dir", filepath.Join(dir, fmt.Sprintf("agent%d", k)))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			logf.Close()
		})
	}
	ready := func() int {
		var n int
		srv.view(func(st *quorum.State) {
			for _, name := range vclusters {
				n += st.VClusterUsage(name).Free
			}
		})
		return n
	}
	benchWaitFor(b, 60*time.Second, fmt.Sprintf("%d nodes Ready", hbAgents*hbNodes), func() bool { return ready() == hbAgents*hbNodes })
	// Settle: every agent has sent at least one heartbeat round.
	time.Sleep(hbInterval + 2*time.Second)

	lastIndex := func() uint64 {
		n, _ := strconv.ParseUint(srv.q.Stats()["last_log_index"], 10, 64)
		return n
	}
	b.ResetTimer()
	idx0, applied0, cpu0, t0 := lastIndex(), srv.q.AppliedIndex(), benchProcessCPU(b), time.Now()
	time.Sleep(hbWindow)
	idx1, applied1, cpu1, t1 := lastIndex(), srv.q.AppliedIndex(), benchProcessCPU(b), time.Now()
	b.StopTimer()

	if n := ready(); n != hbAgents*hbNodes {
		b.Errorf("%d of %d nodes Ready after the window", n, hbAgents*hbNodes)
	}
	b.ReportMetric(100*(cpu1-cpu0).Seconds()/t1.Sub(t0).Seconds(), "cpu_%_of_core")
	b.ReportMetric(float64(idx1-idx0), "raft_entries")
	b.ReportMetric(float64(applied1-applied0), "applied_entries")
	b.ReportMetric(float64(hbAgents*hbNodes), "nodes")
}

// benchProcessCPU is the CPU time (user + system) of this process, not of
// its children.
func benchProcessCPU(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
