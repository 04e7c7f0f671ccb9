package server

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// TestStepOptions runs srun's options in a 2-node job submitted with
// #SBATCH -N2 --ntasks-per-node=4: srun starts the job's 8 tasks by
// default, a relative program resolves against the caller's directory and
// a bare name through PATH, -N1 keeps the job's task count (as Slurm
// does), -w picks nodes, --multi-prog runs a program per rank,
// --export=NONE keeps only SLURM_* and LATTICE_*, and --mpi=pmix is
// refused with a message naming what works.
func TestStepOptions(t *testing.T) {
	d, dir := stepStack(t, 2)
	sub := filepath.Join(dir, "work")
	bin := filepath.Join(dir, "mybin")
	for _, p := range []string{sub, bin} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(sub, "rel_prog"), "#!/bin/sh\necho REL $SLURM_PROCID $SLURMD_NODENAME\n")
	write(filepath.Join(bin, "on_path"), "#!/bin/sh\necho PATH $SLURM_PROCID\n")
	write(filepath.Join(sub, "multi.conf"), "# rank program args\n0 echo MULTI first %t\n1-3,5 echo MULTI mid %t %o\n* echo MULTI rest %t\n")
	script := `#!/bin/sh
#SBATCH -N2 --ntasks-per-node=4
cd work
echo "DEFAULT $(srun echo x | wc -l)"
srun ./rel_prog
PATH=$PATH:` + bin + ` srun on_path
srun -N1 sh -c 'echo N1 $SLURM_NTASKS $SLURM_STEP_TASKS_PER_NODE $SLURMD_NODENAME'
srun -w "$(echo $LATTICE_NODELIST | cut -d, -f2)" -n1 sh -c 'echo W $SLURMD_NODENAME'
srun -n6 --multi-prog multi.conf
FOO=bar srun -n1 --export=NONE sh -c 'echo EXPORT foo=$FOO ntasks=$SLURM_NTASKS'
FOO=bar srun -n1 --export=FOO sh -c 'echo EXPORT2 foo=$FOO'
srun -n1 --mpi=pmix true 2>&1 | sed 's/^/PMIX /'
srun -n2 -l --cpu-bind=none --kill-on-bad-exit=1 echo L
`
	path := filepath.Join(dir, "opts.sh")
	write(path, script)
	out, errOut, code := d.ctl(t, dir, "submit", "--parsable", path)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	a := d.waitEnded(t, id)
	b, _ := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	got := string(b)
	if a.State != string(model.StateCompleted) {
		t.Fatalf("job %s %s; output:\n%s", id, a.State, got)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		f := strings.SplitN(l, " ", 2)
		if len(f) == 2 {
			lines[f[0]] = append(lines[f[0]], f[1])
		}
	}
	for k := range lines {
		sort.Strings(lines[k])
	}
	n0, n1 := a.Nodes[0], a.Nodes[1]
	want := map[string][]string{
		"DEFAULT": {"8"},
		"REL":     {"0 " + n0, "1 " + n0, "2 " + n0, "3 " + n0, "4 " + n1, "5 " + n1, "6 " + n1, "7 " + n1},
		"PATH":    {"0", "1", "2", "3", "4", "5", "6", "7"},
		"N1":      {"8 8 " + n0, "8 8 " + n0, "8 8 " + n0, "8 8 " + n0, "8 8 " + n0, "8 8 " + n0, "8 8 " + n0, "8 8 " + n0},
		"W":       {n1},
		"MULTI":   {"first 0", "mid 1 0", "mid 2 1", "mid 3 2", "mid 5 3", "rest 4"},
		"EXPORT":  {"foo= ntasks=1"},
		"EXPORT2": {"foo=bar"},
		"0:":      {"L"},
		"1:":      {"L"},
	}
	for k, w := range want {
		if strings.Join(lines[k], "|") != strings.Join(w, "|") {
			t.Errorf("%s lines %q, want %q", k, lines[k], w)
		}
	}
	if p := strings.Join(lines["PMIX"], " "); !strings.Contains(p, "no PMIx server") || !strings.Contains(p, "pmi2") {
		t.Errorf("srun --mpi=pmix said %q, want it refused naming pmi2", p)
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
}
