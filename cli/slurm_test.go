package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// runSlurm runs Slurm command name in process, with run's fixed
// environment (user alice, clock at t0, UTC).
func runSlurm(t *testing.T, stdin string, env map[string]string, name string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := Env{
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "LATTICE_RETRY_BUDGET" {
				return "300ms"
			}
			return ""
		},
		Environ:  func() []string { return []string{"HOME=/home/alice", "PATH=/usr/bin"} },
		Getwd:    func() (string, error) { return "/home/alice/proj", nil },
		Now:      func() time.Time { return t0 },
		Location: time.UTC,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := MainAs(ctx, e, "/usr/local/bin/"+name, args)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

func TestGetopt(t *testing.T) {
	opts := []sopt{{"noheader", 'h', noArg, ""}, {"format", 'o', needArg, ""}, {"Format", 'O', needArg, ""},
		{"jobs", 'j', needArg, ""}, {"long", 'l', noArg, ""}, {"name", 'n', needArg, ""}, {"nodes", 'N', needArg, ""}}
	a, err := getopt(opts, []string{"-hl", "-o%i %T", "x", "--form=%j", "--jo", "5", "-N3", "--", "-y"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !a.has("noheader") || !a.has("long") || a.get("format") != "%j" || a.get("jobs") != "5" || a.get("nodes") != "3" {
		t.Errorf("parsed %+v", a.vals)
	}
	if !slices.Equal(a.pos, []string{"x", "-y"}) {
		t.Errorf("operands %q", a.pos)
	}
	// --n is ambiguous (name, nodes, noheader); --F is Format, not format.
	if _, err := getopt(opts, []string{"--n", "x"}, false); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("--n: %v", err)
	}
	if a, err := getopt(opts, []string{"--F=JobID"}, false); err != nil || a.get("Format") != "JobID" {
		t.Errorf("--F: %v %v", a, err)
	}
	for _, bad := range [][]string{{"--bogus"}, {"-z"}, {"-o"}, {"--noheader=1"}} {
		if _, err := getopt(opts, bad, false); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// sbatch's order: options end at the script.
	a, _ = getopt(opts, []string{"-h", "job.sh", "-o", "x"}, true)
	if !slices.Equal(a.pos, []string{"job.sh", "-o", "x"}) || a.has("format") {
		t.Errorf("in order: %+v %q", a.vals, a.pos)
	}
}

func TestSbatchSubmits(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := runSlurm(t, "", env, "sbatch", "--wrap", "hostname", "-N2", "-p", "hpc-batch", "-A", "alice", "--mem=4G",
		"--mem-per-cpu", "1000", "--cpus-per-task=2", "-C", "ib", "--export=NONE", "-D", "/scratch/run", "-t", "10")
	mustCode(t, r, 0)
	if r.stdout != "Submitted batch job 40\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	req := f.submits[0].GetRequest()
	if req.GetNodesMin() != 2 || req.GetVcluster() != "hpc-batch" || req.GetTenant() != "alice" || req.GetWalltimeSeconds() != 600 ||
		req.GetWorkDir() != "/scratch/run" || len(req.GetEnv()) != 0 || req.GetName() != "wrap" ||
		!slices.Equal(req.GetConstraints(), []string{"ib"}) || !strings.Contains(req.GetScript(), "\nhostname\n") || !strings.HasPrefix(req.GetScript(), "#!/bin/sh\n") {
		t.Errorf("request %v", req)
	}

	r = runSlurm(t, "", env, "sbatch", "--parsable", "--wrap=true")
	mustCode(t, r, 0)
	if r.stdout != "41\n" {
		t.Errorf("--parsable: %q", r.stdout)
	}

	// A script on standard input, its #SBATCH lines honoured; the name is sbatch's.
	r = runSlurm(t, "#!/bin/bash\n#SBATCH -N 3\n#SBATCH --time=5\n#SBATCH --mem=1G\n#SBATCH --cpus-per-task=2\necho hi\n", env, "sbatch")
	mustCode(t, r, 0)
	if r.stderr != "" { // whole nodes meet --mem and --cpus-per-task: nothing to say
		t.Errorf("stderr %q", r.stderr)
	}
	if req := f.submits[2].GetRequest(); req.GetNodesMin() != 3 || req.GetWalltimeSeconds() != 300 || req.GetName() != "sbatch" {
		t.Errorf("stdin script: %v", req)
	}

	// A script file: options after it are its arguments, not sbatch's.
	p := writeScript(t, "#!/bin/sh\n#SBATCH -J fromfile\ntrue\n")
	r = runSlurm(t, "", env, "sbatch", "-t", "1", p)
	mustCode(t, r, 0)
	if req := f.submits[3].GetRequest(); req.GetName() != "fromfile" {
		t.Errorf("script name %q", req.GetName())
	}
	r = runSlurm(t, "", env, "sbatch", p, "-N", "2")
	if r.code != 1 || !strings.Contains(r.stderr, "sbatch: error: script arguments") {
		t.Errorf("script arguments: %+v", r)
	}

	// --test-only sends nothing.
	n := len(f.submits)
	r = runSlurm(t, "", env, "sbatch", "--test-only", "--wrap", "true")
	mustCode(t, r, 0)
	if len(f.submits) != n || r.stdout != "" || !strings.Contains(r.stderr, "sbatch: Job would be accepted") {
		t.Errorf("--test-only: %+v", r)
	}
}

func TestSbatchRefusesAsSlurm(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	for _, tc := range []struct {
		args   []string
		stdin  string
		stderr string
	}{
		{[]string{"--bogus", "--wrap", "x"}, "", "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information\n"},
		{[]string{"-N"}, "", "sbatch: option requires an argument -- 'N'\n"},
		{[]string{"--parsable=yes"}, "", "sbatch: option '--parsable' doesn't allow an argument\n"},
		{nil, "echo no shebang\n", "sbatch: error: This does not look like a batch script.  The first\n"},
		{nil, "", "sbatch: error: Batch script is empty!\n"},
		{[]string{"--wrap", "x", "--mem", "lots"}, "", "sbatch: error: invalid mem \"lots\""},
		{[]string{"--wrap", "x", "script.sh"}, "", "sbatch: error: Script arguments not permitted with --wrap option\n"},
	} {
		r := runSlurm(t, tc.stdin, env, "sbatch", tc.args...)
		want := 1
		if !strings.Contains(tc.stderr, "error:") {
			want = 255 // sbatch's exit code for a bad command line
		}
		if r.code != want || !strings.HasPrefix(r.stderr, tc.stderr) && !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("sbatch %q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, want, tc.stderr)
		}
	}
	if len(f.submits) != 0 {
		t.Errorf("%d submitted", len(f.submits))
	}
}

// arrayFake adds array 20 to the fake: tasks 3..9 pending, task 2 running.
func arrayFake(f *fakeServer) {
	req := &latticev1.AllocationRequest{Name: "sweep", Tenant: "alice", Vcluster: "hpc-batch", NodesMin: 1, NodesMax: 1, WalltimeSeconds: 1800, PriorityClass: 5}
	f.allocs = append(f.allocs, &latticev1.Allocation{Id: 20, DisplayId: "20_2", Request: req, State: "RUNNING", ArrayJobId: 20, ArrayIndex: 2,
		Nodes: []string{"n004"}, SubmitTimeUnixMs: ms(-time.Hour), StartTimeUnixMs: ms(-65 * time.Second)})
	for i := int32(3); i <= 9; i++ {
		f.allocs = append(f.allocs, &latticev1.Allocation{Id: 18 + uint64(i), DisplayId: "20_" + string(rune('0'+i)), Request: req,
			State: "PENDING", Reason: "Priority", ArrayJobId: 20, ArrayIndex: i, SubmitTimeUnixMs: ms(-time.Hour)})
	}
}

func TestSqueueFormats(t *testing.T) {
	f := newFakeServer(t)
	arrayFake(f)
	env := servers(f.addr)
	var out strings.Builder
	for _, args := range [][]string{
		nil,
		{"-r"},
		{"-l"},
		{"-h", "-o", "%i %T %R"},
		{"-o", "%.10i|%6P|%5j|%t|%M|%l|%D|%a|%S|%V"},
		{"-O", "JobID:6,Name:.8,State,ReasonList"},
		{"-t", "all", "-o", "%i %t %r"},
		{"-t", "PD", "--noheader", "-o", "%i"},
		{"-u", "alice", "-p", "ml-training", "-h"},
		{"-j", "13", "-h", "--format=%i %j"},
		{"--me", "-n", "sweep", "-h", "-o", "%i"},
	} {
		env["USER"] = "alice" // --me: the server's WhoAmI, else $USER (the fake has no AccountService)
		r := runSlurm(t, "", env, "squeue", args...)
		mustCode(t, r, 0)
		out.WriteString("$ squeue " + strings.Join(args, " ") + "\n" + r.stdout)
	}
	golden(t, "slurm/squeue.txt", out.String())

	// An ended job is known but not shown without -t (as Slurm's squeue).
	if r := runSlurm(t, "", env, "squeue", "-h", "-j", "14_0"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("squeue -j of an ended job: %+v", r)
	}
	r := runSlurm(t, "", env, "squeue", "-j", "99")
	if r.code != 1 || r.stderr != "slurm_load_jobs error: Invalid job id specified\n" {
		t.Errorf("squeue -j 99: %+v", r)
	}
	r = runSlurm(t, "", env, "squeue", "-t", "XX")
	if r.code != 1 || !strings.Contains(r.stderr, "Invalid job state specified: XX") {
		t.Errorf("squeue -t XX: %+v", r)
	}
}

func TestSacctFormats(t *testing.T) {
	f := newFakeServer(t)
	arrayFake(f)
	f.allocs[0].Steps = []*latticev1.Step{{Id: 0, Nodes: []string{"n001", "n002"}, Tasks: 8, Command: []string{"python", "train.py"},
		State: "RUNNING", StartTimeUnixMs: ms(-20 * time.Minute)}}
	env := servers(f.addr)
	var out strings.Builder
	for _, args := range [][]string{
		{"-S", "2026-03-01"},
		{"-X", "-P", "-n", "--format=JobIDRaw,State,ExitCode", "-S", "2026-03-01"},
		{"-p", "-j", "14_0", "-o", "JobID,JobName%20,elapsed,start,end,NodeList"},
		{"-j", "12", "-o", "jobid,jobname%4,ncpus,state%6"},
		{"-s", "R", "-X", "--noheader"},
		{"-a", "-X", "--name", "sweep", "-S", "2026-03-01", "-o", "JobID,State,Timelimit,Submit"},
		{"-b", "-j", "20"},
	} {
		r := runSlurm(t, "", env, "sacct", args...)
		mustCode(t, r, 0)
		out.WriteString("$ sacct " + strings.Join(args, " ") + "\n" + r.stdout)
	}
	golden(t, "slurm/sacct.txt", out.String())
	r := runSlurm(t, "", env, "sacct", "-o", "JobID,Bogus")
	if r.code != 1 || r.stderr != "sacct: error: Invalid field requested: \"Bogus\"\n" {
		t.Errorf("bad field: %+v", r)
	}
}

func TestSinfoScontrolFormats(t *testing.T) {
	f := newFakeServer(t)
	f.vcs = append(f.vcs, &latticev1.VClusterInfo{Name: "ml-training"})
	f.nodes = append(f.nodes,
		&latticev1.Node{Name: "n002", State: "Ready", HomeVcluster: "ml-training", CurrentVcluster: "ml-training", Allocation: 12, Cpus: 8, MemoryMb: 64000},
		&latticev1.Node{Name: "n004", State: "Ready", HomeVcluster: "hpc-batch", CurrentVcluster: "hpc-batch"},
		&latticev1.Node{Name: "n005", State: "Ready", HomeVcluster: "hpc-batch", CurrentVcluster: "hpc-batch"},
		&latticev1.Node{Name: "n006", State: "Draining", HomeVcluster: "hpc-batch", CurrentVcluster: "hpc-batch", Allocation: 9, StateReason: "bad DIMM"})
	env := servers(f.addr)
	var out strings.Builder
	for _, args := range [][]string{
		nil, {"-N"}, {"-s"}, {"-R"}, {"-h", "-o", "%P %D %t %N"}, {"-p", "ml-training"}, {"-t", "idle", "-h"},
	} {
		r := runSlurm(t, "", env, "sinfo", args...)
		mustCode(t, r, 0)
		out.WriteString("$ sinfo " + strings.Join(args, " ") + "\n" + r.stdout)
	}
	for _, args := range [][]string{
		{"show", "job", "12"}, {"show", "jobid", "-dd", "13"}, {"-o", "show", "job", "14_0"}, {"show", "node", "n003"}, {"show", "partition", "hpc-batch"},
	} {
		r := runSlurm(t, "", env, "scontrol", args...)
		mustCode(t, r, 0)
		out.WriteString("$ scontrol " + strings.Join(args, " ") + "\n" + r.stdout)
	}
	golden(t, "slurm/sinfo-scontrol.txt", out.String())
	r := runSlurm(t, "", env, "scontrol", "show", "job", "99")
	if r.code != 1 || r.stderr != "slurm_load_jobs error: Invalid job id specified\n" {
		t.Errorf("show job 99: %+v", r)
	}
}

func TestScancelAndJobControl(t *testing.T) {
	f := newFakeServer(t)
	arrayFake(f)
	env := servers(f.addr)
	r := runSlurm(t, "", env, "scancel", "13", "14_0")
	mustCode(t, r, 0)
	if r.stdout != "" || r.stderr != "" || len(f.cancels) != 2 {
		t.Errorf("scancel: %+v, %d cancels", r, len(f.cancels))
	}
	// By filter: alice's pending jobs named sweep (the array's tasks).
	r = runSlurm(t, "", env, "scancel", "-u", "alice", "-t", "PENDING", "-n", "sweep")
	mustCode(t, r, 0)
	var got []string
	for _, c := range f.cancels[2:] {
		got = append(got, c.GetIds()...)
	}
	if !slices.Equal(got, []string{"20_3", "20_4", "20_5", "20_6", "20_7", "20_8", "20_9"}) {
		t.Errorf("filtered cancel: %q", got)
	}
	r = runSlurm(t, "", env, "scancel")
	if r.code != 1 || !strings.Contains(r.stderr, "No job identification provided") {
		t.Errorf("scancel alone: %+v", r)
	}
	r = runSlurm(t, "", env, "scontrol", "hold", "13")
	mustCode(t, r, 0)
	r = runSlurm(t, "", env, "scontrol", "release", "JobId=13")
	mustCode(t, r, 0)
	calls, _, _ := f.snapshot()
	if !slices.Contains(calls, "Hold") || !slices.Contains(calls, "Release") {
		t.Errorf("calls %q", calls)
	}
}

func TestSacctmgrSshareSprio(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	env["USER"] = "alice" // the caller without the server's WhoAmI (the fake has no AccountService)
	var out strings.Builder
	for _, c := range [][]string{
		{"sacctmgr", "-n", "-s", "list", "user", "alice", "format=account%20"},
		{"sacctmgr", "-P", "show", "assoc", "format=cluster,account,user,share"},
		{"sacctmgr", "list", "account"},
		{"sshare"},
		{"sshare", "-P", "-A", "bob"},
		{"sprio"},
	} {
		r := runSlurm(t, "", env, c[0], c[1:]...)
		mustCode(t, r, 0)
		out.WriteString("$ " + strings.Join(c, " ") + "\n" + r.stdout)
	}
	golden(t, "slurm/accounting.txt", out.String())
}

func TestSlurmCommandsInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slurm")
	target := filepath.Join(t.TempDir(), "latticectl")
	if err := os.WriteFile(target, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := InstallSlurmCommands(dir, target, false, &log); err != nil {
		t.Fatal(err)
	}
	for _, name := range SlurmCommands {
		if l, err := os.Readlink(filepath.Join(dir, name)); err != nil || l != target {
			t.Errorf("%s: %q %v", name, l, err)
		}
	}
	// Again: kept. A foreign file of that name: refused without --force.
	if err := InstallSlurmCommands(dir, target, false, &log); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "squeue"))
	os.WriteFile(filepath.Join(dir, "squeue"), []byte("x"), 0o755)
	if err := InstallSlurmCommands(dir, target, false, &log); err == nil {
		t.Error("foreign squeue replaced without --force")
	}
	if err := InstallSlurmCommands(dir, target, true, &log); err != nil {
		t.Fatal(err)
	}
}

func TestArgv0Dispatch(t *testing.T) {
	f := newFakeServer(t)
	// As latticectl, "squeue" is no command; as squeue, it is squeue.
	r := runSlurm(t, "", servers(f.addr), "latticectl", "status", "-o", "json")
	mustCode(t, r, 0)
	r = runSlurm(t, "", servers(f.addr), "squeue", "-h", "-o", "%i")
	mustCode(t, r, 0)
	if r.stdout != "13\n12\n" {
		t.Errorf("squeue via argv0: %q", r.stdout)
	}
}

// nodes drain takes a hostlist: every node it names is drained, and one
// that does not exist fails the command (exit 3) without stopping the rest.
func TestNodesDrainHostlist(t *testing.T) {
	f := newFakeServer(t)
	f.nodes = append(f.nodes, &latticev1.Node{Name: "n004", State: "Ready"}, &latticev1.Node{Name: "n005", State: "Ready"})
	r := run(t, servers(f.addr), "nodes", "drain", "n[003-005]", "--reason", "rack 3 maintenance")
	mustCode(t, r, 0)
	var got []string
	for _, d := range f.drains {
		got = append(got, d.GetName()+"/"+d.GetReason())
	}
	if !slices.Equal(got, []string{"n003/rack 3 maintenance", "n004/rack 3 maintenance", "n005/rack 3 maintenance"}) {
		t.Errorf("drained %q", got)
	}
	r = run(t, servers(f.addr), "nodes", "drain", "n[005-006]", "--reason", "x")
	if r.code != ExitNotFound || !strings.Contains(r.stderr, "n006") || f.drains[len(f.drains)-2].GetName() != "n005" {
		t.Errorf("unknown node in a hostlist: %+v", r)
	}
	r = run(t, servers(f.addr), "nodes", "drain", "n[005-", "--reason", "x")
	if r.code != ExitUsage {
		t.Errorf("bad hostlist: %+v", r)
	}
}

// salloc is `latticectl alloc`; until this latticectl has it, it says so.
func TestSallocWithoutAlloc(t *testing.T) {
	if findCommand((&runner{Env: OSEnv()}).app().Commands, "alloc") != nil {
		t.Skip("latticectl alloc exists: salloc runs it (its own tests cover it)")
	}
	r := runSlurm(t, "", nil, "salloc", "-N1")
	if r.code != 1 || !strings.Contains(r.stderr, "salloc: error: salloc is not available in this Lattice yet") {
		t.Errorf("salloc: %+v", r)
	}
}

// sacct's usage fields, per job and per step row (12.0; a batch script's
// 12.batch row shows the job's).
func TestSacctUsageRows(t *testing.T) {
	f := newFakeServer(t)
	arrayFake(f)
	a := f.allocs[0]
	a.Usage = &latticev1.JobUsage{UserCpuSeconds: 61.5, SystemCpuSeconds: 2.25, MaxRssBytes: 200 << 20, ConsumedEnergyJoules: 12345, EnergySource: "model"}
	a.Steps = []*latticev1.Step{{Id: 0, Nodes: []string{"n001"}, Tasks: 1, Command: []string{"burn"}, State: "COMPLETED",
		StartTimeUnixMs: ms(-20 * time.Minute), EndTimeUnixMs: ms(-19 * time.Minute), HasExitCode: true,
		Usage: &latticev1.JobUsage{UserCpuSeconds: 1.5, SystemCpuSeconds: 0.5, MaxRssBytes: 100 << 20}}}
	r := runSlurm(t, "", servers(f.addr), "sacct", "-P", "-j", a.DisplayId, "-o", "JobID,TotalCPU,UserCPU,SystemCPU,MaxRSS,ConsumedEnergy")
	mustCode(t, r, 0)
	want := "JobID|TotalCPU|UserCPU|SystemCPU|MaxRSS|ConsumedEnergy\n" +
		a.DisplayId + "|01:03.750|01:01.500|00:02.250|204800K|12.35K\n" +
		a.DisplayId + ".0|00:02.000|00:01.500|00:00.500|102400K|\n"
	if r.stdout != want {
		t.Fatalf("got\n%s\nwant\n%s", r.stdout, want)
	}
}
