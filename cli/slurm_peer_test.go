package cli

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// The comparison with a real Slurm 22.05: testdata/slurm/peer-22.05.txt is
// what Slurm's own commands printed (stdout, "! " stderr, "? " exit code)
// for a scenario recorded by scripts/record-slurm-peer.sh on the Slurm
// peer (../shared/peers/slurm). peerFake is the same scenario as Lattice
// state; every command must print what Slurm printed, byte for byte once
// the values that differ between any two runs are masked (peerMask).
// docs/slurm-commands.md lists what is compared.

// peerCommands are the commands of record-slurm-peer.sh, in its order.
var peerCommands = [][]string{
	{"squeue"},
	{"squeue", "-r"},
	{"squeue", "-h", "-o", "%i %T %R"},
	{"squeue", "-o", "%.10i|%6P|%5j|%t|%l|%D|%a|%r"},
	{"squeue", "-O", "JobID:6,Name:.8,State,ReasonList"},
	{"squeue", "-t", "PD", "--noheader", "-o", "%i"},
	{"squeue", "-j", "2", "-h", "--format=%i %j %u %D %l"},
	{"squeue", "-j", "999"},
	{"squeue", "-t", "XX"},
	{"squeue", "--bogus"},
	{"sinfo"},
	{"sinfo", "-N"},
	{"sinfo", "-s"},
	{"sinfo", "-R"},
	{"sinfo", "-h", "-o", "%P %D %t %N"},
	{"sinfo", "-t", "idle", "-h"},
	{"scontrol", "show", "job", "2"},
	{"scontrol", "-o", "show", "job", "2"},
	{"scontrol", "show", "node", "n4"},
	{"scontrol", "show", "partition", "batch"},
	{"scontrol", "show", "job", "999"},
	{"scancel", "999"},
	{"sbatch", "--bogus"},
	{"sbatch", "-N"},
}

// peerFake is the recorded scenario: partition batch* of n[1-4]; job 1
// (sleeper) running on n1 for 11 s; 2 (held, 2 nodes), array 3_[3-9] (arr)
// and 4 (p) pending, held; n4 drained by root ("bad DIMM"). Slurm had no
// accounting: the account is "(null)".
func peerFake(t *testing.T) *fakeServer {
	f := newFakeServer(t)
	now := t0
	at := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	req := func(name string, nodes int32, mins int64) *latticev1.AllocationRequest {
		return &latticev1.AllocationRequest{Name: name, Tenant: "(null)", User: "root", Vcluster: "batch", NodesMin: nodes, NodesMax: nodes,
			WalltimeSeconds: mins * 60, PriorityClass: 5, WorkDir: "/tmp/i27rec", Stdout: "slurm-%j.out", Requeue: true}
	}
	held := func(id uint64, r *latticev1.AllocationRequest) *latticev1.Allocation {
		return &latticev1.Allocation{Id: id, DisplayId: strconv.FormatUint(id, 10), Request: r, State: "PENDING", Reason: "JobHeldUser", SubmitTimeUnixMs: at(-10 * time.Second)}
	}
	f.allocs = []*latticev1.Allocation{
		{Id: 1, DisplayId: "1", Request: req("sleeper", 1, 10), State: "RUNNING", Nodes: []string{"n1"},
			SubmitTimeUnixMs: at(-11 * time.Second), StartTimeUnixMs: at(-11 * time.Second)},
		held(2, req("held", 2, 5)),
	}
	for i := int32(3); i <= 9; i++ {
		id := uint64(i + 8) // Lattice gives each task its own id; the array's is its first task's
		if i == 3 {
			id = 3
		}
		a := held(id, req("arr", 1, 1))
		a.DisplayId, a.ArrayJobId, a.ArrayIndex = "3_"+strconv.Itoa(int(i)), 3, i
		f.allocs = append(f.allocs, a)
	}
	f.allocs = append(f.allocs, held(4, req("p", 1, 1)))
	f.vcs = []*latticev1.VClusterInfo{{Name: "batch"}}
	f.nodes = nil
	for i := 1; i <= 4; i++ {
		n := &latticev1.Node{Name: "n" + strconv.Itoa(i), State: "Ready", HomeVcluster: "batch", CurrentVcluster: "batch", Cpus: 1, MemoryMb: 100}
		f.nodes = append(f.nodes, n)
	}
	f.nodes[0].Allocation = 1
	f.nodes[3].State, f.nodes[3].StateReason, f.nodes[3].StateReasonBy, f.nodes[3].StateReasonUnixMs = "Drained", "bad DIMM", "root", at(-20*time.Second)
	f.defaultVC = "batch"
	return f
}

var (
	peerDate    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)
	peerRunTime = regexp.MustCompile(`\b0:[0-5]\d\b`)
	peerHeader  = regexp.MustCompile(`^# recorded .*\n`)
	// Values of a node's and a partition's record that describe the
	// machine Slurm ran on, not the format.
	peerMachine = regexp.MustCompile(`(CPULoad|NodeAddr|NodeHostName|RealMemory|FreeMem|BootTime|SlurmdStartTime|LastBusyTime|CfgTRES|TRES|AllocNode:Sid)=(\S+)`)
	peerOS      = regexp.MustCompile(`(?m)^   OS=.*$`)
)

// peerMask masks what differs between any two runs of the scenario:
// dates, a running job's seconds, the machine's own values, the memory
// Slurm counts in TRES (Lattice allocates whole nodes), a node's port.
func peerMask(s string) string {
	s = peerHeader.ReplaceAllString(s, "")
	s = peerDate.ReplaceAllString(s, "YYYY-MM-DDTHH:MM:SS")
	s = peerRunTime.ReplaceAllString(s, "0:SS")
	s = peerMachine.ReplaceAllString(s, "$1=*")
	s = peerOS.ReplaceAllString(s, "   OS=*")
	s = strings.ReplaceAll(s, " Port=17004", "")
	return s
}

func TestSlurmPeerComparison(t *testing.T) {
	raw, err := os.ReadFile("testdata/slurm/peer-22.05.txt")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(peerMask(string(raw)), "$ ")[1:]
	if len(blocks) != len(peerCommands) {
		t.Fatalf("%d recorded commands, %d in peerCommands", len(blocks), len(peerCommands))
	}
	f := peerFake(t)
	env := servers(f.addr)
	for i, args := range peerCommands {
		want := blocks[i]
		cmdLine, _, _ := strings.Cut(want, "\n")
		if cmdLine != strings.Join(args, " ") {
			t.Fatalf("block %d is %q, want %q", i, cmdLine, strings.Join(args, " "))
		}
		r := runSlurm(t, "", env, args[0], args[1:]...)
		var got strings.Builder
		got.WriteString(strings.Join(args, " ") + "\n" + r.stdout)
		for _, l := range strings.SplitAfter(r.stderr, "\n") {
			if l != "" {
				got.WriteString("! " + l)
			}
		}
		if r.stderr != "" && !strings.HasSuffix(r.stderr, "\n") {
			got.WriteString("\n")
		}
		got.WriteString("? " + strconv.Itoa(r.code) + "\n")
		if g := peerMask(got.String()); g != want {
			t.Errorf("%s differs from Slurm 22.05:\n--- lattice\n%s--- slurm\n%s", strings.Join(args, " "), g, want)
		}
	}
}
