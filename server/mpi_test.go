package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// ensureMPI installs Open MPI and MPICH through scripts/install-test-tools.sh
// when their commands are missing, or skips the test saying why.
func ensureMPI(t *testing.T) {
	t.Helper()
	out, err := exec.Command("sh", "../scripts/install-test-tools.sh", "openmpi", "mpich").CombinedOutput()
	if err != nil {
		t.Skipf("needs Open MPI and MPICH (openmpi-bin, libopenmpi-dev, mpich, libmpich-dev), which scripts/install-test-tools.sh could not install here: %v\n%s", err, out)
	}
	for _, c := range []string{"mpicc.openmpi", "mpicc.mpich", "mpirun.openmpi", "mpiexec.hydra"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s (Debian's openmpi-bin and mpich): %v", c, err)
		}
	}
}

// mpiRanks checks the hello world's lines of one run: ranks 0..n-1 once
// each, rank r on node nodes[r/perNode], and the allreduce's sum.
func mpiRanks(t *testing.T, what, out string, nodes []string, n, perNode int) {
	t.Helper()
	line := regexp.MustCompile(`^rank (\d+) of (\d+) on (\S+) sum (\d+) slurmd \S+$`)
	seen := map[int]bool{}
	for _, l := range strings.Split(out, "\n") {
		m := line.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		size, _ := strconv.Atoi(m[2])
		sum, _ := strconv.Atoi(m[4])
		if seen[rank] {
			t.Errorf("%s: rank %d twice", what, rank)
		}
		seen[rank] = true
		if size != n || sum != n*(n+1)/2 {
			t.Errorf("%s: %q: want size %d and allreduce sum %d", what, l, n, n*(n+1)/2)
		}
		if rank < n && m[3] != nodes[rank/perNode] {
			t.Errorf("%s: rank %d reports node %s, want %s (block layout)", what, rank, m[3], nodes[rank/perNode])
		}
	}
	if len(seen) != n {
		t.Errorf("%s: %d ranks reported, want %d; output:\n%s", what, len(seen), n, out)
	}
}

// TestMPIHelloWorldOnFourNodes is the MPI check: a C hello world
// with an allreduce, compiled here with Debian's mpicc, on 4 nodes × 2
// tasks (#SBATCH -N4 --ntasks-per-node=2): by Open MPI's mpirun and by
// MPICH's mpiexec inside the batch script (both launch their daemons
// through our srun), and by srun --mpi=pmi2 direct launch (MPICH, through
// the step's PMI server). The script runs unchanged under Slurm 22.05
// (testdata/slurm-22.05/mpi-hello.out). With LATTICE_LONG_TESTS=1 a hybrid
// MPI+OpenMP job (-c4, OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK) runs too.
func TestMPIHelloWorldOnFourNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("MPI on a 4-node dev stack: not in -short")
	}
	ensureMPI(t)
	d, dir := stepStack(t, 4)
	src, err := filepath.Abs("testdata/mpi/hello_allreduce.c")
	if err != nil {
		t.Fatal(err)
	}
	hybrid, err := filepath.Abs("testdata/mpi/hybrid.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"mpicc.openmpi", "-o", "hello_ompi", src}, {"mpicc.mpich", "-o", "hello_mpich", src},
		{"mpicc.openmpi", "-fopenmp", "-o", "hybrid_ompi", hybrid}, {"mpicc.mpich", "-fopenmp", "-o", "hybrid_mpich", hybrid}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	hello, helloNodes := submitMPIScript(t, d, dir, "hello.sh")
	for _, run := range []string{"openmpi mpirun", "mpich mpiexec", "mpich srun --mpi=pmi2"} {
		mpiRanks(t, run, hello[run], helloNodes, 8, 2)
		if !strings.Contains(hello[run], "exit 0") {
			t.Errorf("%s did not exit 0:\n%s", run, hello[run])
		}
	}
	if os.Getenv("LATTICE_LONG_TESTS") == "" {
		t.Log("the hybrid MPI+OpenMP job (testdata/mpi/hybrid.sh, ~15 s more) runs with LATTICE_LONG_TESTS=1")
		return
	}
	hyb, hybNodes := submitMPIScript(t, d, dir, "hybrid.sh")
	// Hybrid: -N2 --ntasks-per-node=2 -c4 and OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK:
	// 4 ranks of 4 threads each.
	line := regexp.MustCompile(`^hybrid rank (\d+) of 4 on (\S+) threads 4 total 16$`)
	for _, run := range []string{"mpich srun --mpi=pmi2", "openmpi mpirun"} {
		ranks := map[string]string{}
		for _, l := range strings.Split(hyb[run], "\n") {
			if m := line.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				ranks[m[1]] = m[2]
			}
		}
		for r := range 4 {
			if ranks[strconv.Itoa(r)] != hybNodes[r/2] {
				t.Errorf("hybrid %s: rank %d on %q, want %s with 4 threads; output:\n%s", run, r, ranks[strconv.Itoa(r)], hybNodes[r/2], hyb[run])
			}
		}
		if !strings.Contains(hyb[run], "exit 0") {
			t.Errorf("hybrid %s did not exit 0:\n%s", run, hyb[run])
		}
	}
}

// submitMPIScript submits testdata/mpi/NAME through latticectl (its
// #SBATCH lines parsed as sbatch would), waits for its end and returns the
// output's "== NAME" sections and the job's nodes.
func submitMPIScript(t *testing.T, d *devStack, dir, name string) (map[string]string, []string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("testdata/mpi", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.ctl(t, dir, "submit", "--parsable", path)
	if code != 0 {
		t.Fatalf("submit %s: exit %d: %s%s", name, code, out, errOut)
	}
	id := strings.TrimSpace(out)
	a := d.waitEnded(t, id)
	b, _ := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	got := string(b)
	if a.State != string(model.StateCompleted) {
		t.Fatalf("%s: job %s %s (exit %d); output:\n%s", name, id, a.State, a.ExitCode, got)
	}
	sections := map[string]string{}
	cur := ""
	for _, l := range strings.Split(got, "\n") {
		if s, ok := strings.CutPrefix(l, "== "); ok {
			cur = s
			continue
		}
		sections[cur] += l + "\n"
	}
	return sections, a.Nodes
}
