package cli

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

func TestSrunArgs(t *testing.T) {
	tests := []struct {
		in   []string
		want []string
		err  bool
	}{
		{[]string{"hostname"}, []string{"run", "--", "hostname"}, false},
		{[]string{"-N2", "-n8", "sh", "-c", "echo $X"}, []string{"run", "--nodes=2", "--ntasks=8", "--", "sh", "-c", "echo $X"}, false},
		{[]string{"--nodes=2-4", "--ntasks", "4", "-l", "./a.out", "-n", "3"}, []string{"run", "--nodes=2", "--ntasks=4", "--label", "--", "./a.out", "-n", "3"}, false},
		{[]string{"--ntasks-per-node=2", "--mpi=pmi2", "-c", "4", "--exclusive", "--", "x"},
			[]string{"run", "--ntasks-per-node=2", "--mpi=pmi2", "--cpus-per-task=4", "--", "x"}, false},
		{[]string{"--kill-on-bad-exit=0", "x"}, []string{"run", "--keep-going", "--", "x"}, false},
		{[]string{"-K0", "x"}, []string{"run", "--keep-going", "--", "x"}, false},
		{[]string{"-K", "--kill-on-bad-exit=1", "x"}, []string{"run", "--", "x"}, false},
		{[]string{"-w", "node[2-3]", "--export=NONE", "--cpu-bind=none", "--multi-prog", "conf"},
			[]string{"run", "--nodelist=node[2-3]", "--export=NONE", "--cpu-bind=none", "--multi-prog", "--", "conf"}, false},
		// How Open MPI 4.1's mpirun (plm slurm) and MPICH 4.0's hydra call srun (seen with a logging srun).
		{[]string{"--ntasks-per-node=1", "--kill-on-bad-exit", "--mpi=none", "--ntasks=4", "orted", "-mca", "ess", "slurm"},
			[]string{"run", "--ntasks-per-node=1", "--mpi=none", "--ntasks=4", "--", "orted", "-mca", "ess", "slurm"}, false},
		{[]string{"--ntasks-per-node=1", "--kill-on-bad-exit", "--cpu_bind=none", "--nodes=3", "--nodelist=n2,n3,n4", "--ntasks=3", "orted"},
			[]string{"run", "--ntasks-per-node=1", "--cpu-bind=none", "--nodes=3", "--nodelist=n2,n3,n4", "--ntasks=3", "--", "orted"}, false},
		{[]string{"-N", "4", "-n", "4", "--input", "none", "/usr/bin/hydra_pmi_proxy", "--proxy-id", "-1"},
			[]string{"run", "--nodes=4", "--ntasks=4", "--", "/usr/bin/hydra_pmi_proxy", "--proxy-id", "-1"}, false},
		{[]string{"-n", "0", "x"}, nil, true},
		{[]string{"-K2", "x"}, nil, true},
		{[]string{"--bogus", "bash"}, nil, true},
		{[]string{"-n"}, nil, true},
		{[]string{"-l"}, nil, true},
	}
	for _, tt := range tests {
		got, err := srunArgs(tt.in)
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("srunArgs(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestRunArgsKeepsTheCommandsFlags(t *testing.T) {
	flags := (&runner{}).runCommand().Flags
	tests := []struct{ in, want []string }{
		{[]string{"-n", "8", "sh", "-c", "x"}, []string{"-n", "8", "--", "sh", "-c", "x"}},
		{[]string{"--label", "-N=2", "hostname", "-f"}, []string{"--label", "-N=2", "--", "hostname", "-f"}},
		{[]string{"-n", "2", "--", "sh", "-c", "x"}, []string{"-n", "2", "--", "sh", "-c", "x"}},
	}
	for _, tt := range tests {
		if got := runArgs(flags, tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("runArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLabelWriter(t *testing.T) {
	var b bytes.Buffer
	l := &labelWriter{w: &b, label: true}
	l.write(0, []byte("a\nb"))
	l.write(1, []byte("x\n"))
	l.write(0, []byte("c\n"))
	l.write(2, []byte("tail"))
	l.flush()
	if want := "0: a\n1: x\n0: bc\n2: tail\n"; b.String() != want {
		t.Errorf("labelled %q, want %q", b.String(), want)
	}
}

func TestRunNeedsAnAllocation(t *testing.T) {
	env := OSEnv()
	var stderr bytes.Buffer
	env.Stderr, env.Stdout = &stderr, &bytes.Buffer{}
	env.Getenv = func(string) string { return "" }
	if code := Main(t.Context(), env, []string{"run", "-n", "2", "hostname"}); code != ExitUsage {
		t.Errorf("exit %d, want %d (usage); stderr %q", code, ExitUsage, stderr.String())
	}
}

func TestSubmitRequeue(t *testing.T) {
	tests := []struct {
		name   string
		script string
		args   []string
		want   bool
	}{
		{"flag", "#!/bin/sh\ntrue\n", []string{"--requeue"}, true},
		{"sbatch", "#!/bin/sh\n#SBATCH --requeue\ntrue\n", nil, true},
		{"flag wins over sbatch", "#!/bin/sh\n#SBATCH --requeue\ntrue\n", []string{"--requeue=false"}, false},
		{"sbatch no-requeue", "#!/bin/sh\n#SBATCH --no-requeue\ntrue\n", nil, false},
		{"default", "#!/bin/sh\ntrue\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := dir + "/job.sh"
			if err := os.WriteFile(path, []byte(tt.script), 0o644); err != nil {
				t.Fatal(err)
			}
			env := OSEnv()
			var out, errb bytes.Buffer
			env.Stdout, env.Stderr = &out, &errb
			args := append(append([]string{"submit", "--dry-run", "-o", "json", "--tenant", "t", "-t", "10"}, tt.args...), path)
			if code := Main(t.Context(), env, args); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			got := strings.Contains(out.String(), `"requeue": true`)
			if got != tt.want {
				t.Errorf("requeue %v, want %v; output %s", got, tt.want, out.String())
			}
		})
	}
}

func TestPowerShowsMeasured(t *testing.T) {
	var out bytes.Buffer
	r := &runner{Env: OSEnv()}
	r.Stdout = &out
	ps := &latticev1.PowerStatus{BudgetWatts: 50000, EstimatedWatts: 12500, MeasuredWatts: 11800, MeasuredNodes: 3}
	if err := r.printPower("table", ps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "MEASURED") || !strings.Contains(out.String(), "11.8kW (3 nodes)") || !strings.Contains(out.String(), "12.5kW") {
		t.Errorf("power table:\n%s\nwant estimated 12.5kW and measured 11.8kW (3 nodes) side by side", out.String())
	}
}

// nodes show prints what the agent detected, the measured draw in force
// and, for a node in Cleanup, why it takes no work.
func TestNodeShowsWhatItIs(t *testing.T) {
	cases := []struct {
		name string
		node *latticev1.Node
		want []string
		not  []string
	}{
		{"real node", &latticev1.Node{Name: "r1", State: "Ready", Cpus: 64, MemoryMb: 515000, GpuType: "NVIDIA H100", Gpus: 4,
			PowerWatts: 312, MeasuredWatts: 312, MeasuredAtUnixMs: 1_700_000_000_000, IdleWatts: 200, BusyWatts: 900},
			[]string{"CPUs:              64", "Memory:            515000 MiB", "GPUs:              4 NVIDIA H100", "312W (measured at"}, nil},
		{"simulated node", &latticev1.Node{Name: "n1", State: "Ready", IdleWatts: 100, BusyWatts: 400, PowerWatts: 100},
			[]string{"100W (idle 100W, busy 400W)"}, []string{"CPUs", "Memory", "GPUs"}},
		{"cleanup", &latticev1.Node{Name: "n2", State: "Cleanup", CleanupAllocation: 42},
			[]string{"State:             Cleanup", "processes of allocation 42 may still run here"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := &runner{Env: OSEnv()}
			r.Stdout = &out
			if err := r.printNode("table", tc.node); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("missing %q in:\n%s", w, out.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("unexpected %q in:\n%s", w, out.String())
				}
			}
		})
	}
}
