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
// the step's PMI server). The script runs unchanged under Slurm 22.05.
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
	for _, c := range [][]string{{"mpicc.openmpi", "-o", "hello_ompi", src}, {"mpicc.mpich", "-o", "hello_mpich", src}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	script, err := os.ReadFile("testdata/mpi/hello.sh")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hello.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.ctl(t, dir, "submit", "--parsable", path)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	a := d.waitEnded(t, id)
	b, _ := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	got := string(b)
	if a.State != string(model.StateCompleted) {
		t.Fatalf("job %s %s (exit %d); output:\n%s", id, a.State, a.ExitCode, got)
	}
	sections := map[string]string{}
	cur := ""
	for _, l := range strings.Split(got, "\n") {
		if name, ok := strings.CutPrefix(l, "== "); ok {
			cur = name
			continue
		}
		sections[cur] += l + "\n"
	}
	for _, run := range []string{"openmpi mpirun", "mpich mpiexec", "mpich srun --mpi=pmi2"} {
		mpiRanks(t, run, sections[run], a.Nodes, 8, 2)
		if !strings.Contains(sections[run], "exit 0") {
			t.Errorf("%s did not exit 0:\n%s", run, sections[run])
		}
	}
}
