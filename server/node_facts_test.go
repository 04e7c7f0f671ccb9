package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// writeMachine writes a machine's /proc and /sys inputs under root.
func writeMachine(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := full + ".tmp"
		if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, full); err != nil {
			t.Fatal(err)
		}
	}
}

// A real node (a `latticed agent` process reading a machine tree the test
// controls): it reports its CPUs and memory at registration; its RAPL
// draw is committed and counted by the power check; when its kernel
// changes, the periodic re-check reports drift and the node of a sensitive
// vCluster is drained with a reason that names the change.
func TestRealNodeReportsWhatItIs(t *testing.T) {
	root := t.TempDir()
	writeMachine(t, root, map[string]string{
		"proc/sys/kernel/osrelease": "6.1.0-18-amd64\n",
		"proc/cmdline":              "BOOT_IMAGE=/vmlinuz quiet\n",
		"proc/cpuinfo":              "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\n\nprocessor\t: 2\n\nprocessor\t: 3\n",
		"proc/meminfo":              "MemTotal:       16384000 kB\nMemFree:         1000 kB\n",
		"sys/class/powercap/intel-rapl:0/energy_uj":           "0",
		"sys/class/powercap/intel-rapl:0/max_energy_range_uj": "262143328850",
	})
	// The package draws 80 W: the counter advances 80 J a second.
	stop := make(chan struct{})
	var energy atomic.Int64
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				v := energy.Add(8_000_000)
				_ = os.WriteFile(filepath.Join(root, "sys/class/powercap/intel-rapl:0/energy_uj.tmp"), []byte(strconv.FormatInt(v, 10)), 0o644)
				_ = os.Rename(filepath.Join(root, "sys/class/powercap/intel-rapl:0/energy_uj.tmp"), filepath.Join(root, "sys/class/powercap/intel-rapl:0/energy_uj"))
			}
		}
	}()
	defer close(stop)

	s := startAgentProcStackArgs(t, 1, func(c *Config) {
		c.VClusters = append(c.VClusters, DefaultVCluster("secure"))
		c.VClusters[1].Type, c.VClusters[1].Algorithm = model.TypeSensitive, model.AlgorithmSensitive
		c.MeasuredPowerInterval = 300 * time.Millisecond
		c.MeasuredPowerMaxAge = 5 * time.Second
	}, []string{"--name", "real1", "--vcluster", "secure", "--machine-root", root, "--fingerprint-check", "300ms", "--node-watts", "200:500"})
	node := func() *latticev1.Node {
		r, err := s.nodes.List(context.Background(), &latticev1.ListNodesRequest{Names: []string{"real1"}})
		if err != nil || len(r.Nodes) != 1 {
			t.Fatalf("list real1: %v %v", r, err)
		}
		return r.Nodes[0]
	}
	n := node()
	if n.Cpus != 4 || n.MemoryMb != 16000 {
		t.Errorf("registered with %d CPUs and %d MiB, want 4 and 16000 (from the machine)", n.Cpus, n.MemoryMb)
	}
	fp := n.Fingerprint

	// Measured: about 80 W, committed, counted instead of the 200 W idle figure.
	waitFor(t, 15*time.Second, "the measured draw to be committed", func() bool {
		n := node()
		return n.MeasuredWatts > 0
	})
	n = node()
	if n.MeasuredWatts < 60 || n.MeasuredWatts > 100 || n.PowerWatts != n.MeasuredWatts {
		t.Errorf("measured %d W, counted %d W; want about 80 W counted", n.MeasuredWatts, n.PowerWatts)
	}
	p, err := s.admin.GetPower(context.Background(), &latticev1.GetPowerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if p.EstimatedWatts != 200 || p.MeasuredNodes != 1 || p.CountedWatts != int64(n.MeasuredWatts) {
		t.Errorf("power: estimated %d W, measured %d W on %d nodes, counted %d W; want 200, ~80 on 1, ~80",
			p.EstimatedWatts, p.MeasuredWatts, p.MeasuredNodes, p.CountedWatts)
	}

	// Drift: the kernel is upgraded under the running agent.
	if n.State != string(model.NodeReady) {
		t.Fatalf("node %s before the drift, want Ready", n.State)
	}
	writeMachine(t, root, map[string]string{"proc/sys/kernel/osrelease": "6.1.0-20-amd64\n"})
	waitFor(t, 15*time.Second, "the drifted node to be drained", func() bool {
		return node().State == string(model.NodeDrained)
	})
	n = node()
	if !strings.Contains(n.StateReason, "fingerprint drift") || !strings.Contains(n.StateReason, "6.1.0-20-amd64") || n.Fingerprint == fp {
		t.Errorf("drained with reason %q, fingerprint %s (was %s); want a drift reason naming the new kernel and the new fingerprint",
			n.StateReason, n.Fingerprint, fp)
	}

	// Restarted on the changed machine: the same (new) fingerprint, no
	// second drift; the admin's undrain stands.
	if _, err := s.nodes.Undrain(context.Background(), &latticev1.UndrainRequest{Name: "real1"}); err != nil {
		t.Fatal(err)
	}
	s.kill9(t)
	s.startAgent(t, 1)
	waitFor(t, 15*time.Second, "the agent to register again", func() bool {
		return strings.Count(s.agentLog.String(), "agent connected") >= 2
	})
	time.Sleep(time.Second)
	if n2 := node(); n2.Fingerprint != n.Fingerprint || n2.State != string(model.NodeReady) {
		t.Errorf("after a restart on the same machine: fingerprint %s (want %s), state %s %q (want Ready)",
			n2.Fingerprint, n.Fingerprint, n2.State, n2.StateReason)
	}
}
