package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseSbatch(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		want     map[string]string // key → value
		warnings []string          // substrings, in order
		err      string
	}{
		{
			name: "every Slurm alias, short and long",
			script: "#!/bin/bash\n" +
				"#SBATCH -N 2-4\n#SBATCH -t 1-02:00:00\n#SBATCH -J train\n#SBATCH -p ml-training\n#SBATCH -A physics\n" +
				"#SBATCH -a 0-9%2\n#SBATCH -d afterok:12\n#SBATCH -C ib&nvme\n#SBATCH -o out_%j.txt\n#SBATCH -e err_%A_%a.txt\n" +
				"#SBATCH -D /scratch\n#SBATCH --gres=gpu:a100:4\n#SBATCH --gpus-per-node=2\n#SBATCH --qos=high\n#SBATCH --export=ALL\n" +
				"echo hi\n",
			want: map[string]string{optNodes: "2-4", optWalltime: "1-02:00:00", optName: "train", optVCluster: "ml-training",
				optTenant: "physics", optArray: "0-9%2", optDependsOn: "afterok:12", optConstraint: "ib&nvme", optStdout: "out_%j.txt",
				optStderr: "err_%A_%a.txt", optWorkDir: "/scratch", optGres: "gpu:a100:4", optGPUsPerNode: "2", optPriority: "qos:high",
				optExport: "ALL"},
		},
		{
			name: "long forms with = and with a space, Lattice spellings, glued short values",
			script: "#!/bin/sh\n#SBATCH --nodes=3 --time 30\n#SBATCH --job-name \"my job\" --partition=hpc-batch\n" +
				"#SBATCH --account=chem --dependency=afterany:7:8 --array=1-5:2 --constraint=ib\n" +
				"#SBATCH --output=o.txt --error=e.txt --chdir=/tmp\n#SBATCH -N4\n" +
				"#SBATCH --vcluster interactive --tenant bio --project p1 --priority-class 7 --checkpoint signal\n",
			want: map[string]string{optNodes: "4", optWalltime: "30", optName: "my job", optVCluster: "interactive",
				optTenant: "bio", optDependsOn: "afterany:7:8", optArray: "1-5:2", optConstraint: "ib", optStdout: "o.txt",
				optStderr: "e.txt", optWorkDir: "/tmp", optProject: "p1", optPriority: "class:7", optCheckpoint: "signal"},
		},
		{
			name:     "unknown options warn, with their values; comments and blank lines are skipped",
			script:   "#!/bin/sh\n\n# a comment\n#SBATCH --licenses=fluent\n#SBATCH --reservation maint -N 2 # two nodes\n#SBATCH --contiguous\n#SBATCH -x n01\n",
			want:     map[string]string{optNodes: "2", optExclude: "n01", optReservation: "maint"},
			warnings: []string{":4: #SBATCH --licenses=fluent is not supported", ":6: #SBATCH --contiguous is not supported"},
		},
		{
			name:   "tasks: -n, --ntasks-per-node, -c, --mem, --mem-per-cpu, --gpus-per-task, --exclusive, -O",
			script: "#SBATCH -n 8 --ntasks-per-node=4 -c2\n#SBATCH --mem=4G --mem-per-cpu 100 --gpus-per-task=1\n#SBATCH --exclusive -O\n",
			want: map[string]string{optNtasks: "8", optNtasksPerNode: "4", optCPUsPerTask: "2", optMem: "4G", optMemPerCPU: "100",
				optGPUsPerTask: "1", optExclusive: "true", optOvercommit: "true"},
		},
		{
			name: "begin, hold, node lists, gpus, mail, requeue switches",
			script: "#!/bin/sh\n#SBATCH --begin=now+1hour -H\n#SBATCH -w nid[001-004] --exclude=nid002\n#SBATCH -G a100:8 --mail-type=END,FAIL --mail-user a@b.c\n" +
				"#SBATCH --requeue\n#SBATCH --no-requeue\n#SBATCH -q debug\n",
			want: map[string]string{optBegin: "now+1hour", optHold: "true", optNodeList: "nid[001-004]", optExclude: "nid002", optGPUs: "a100:8",
				optMailType: "END,FAIL", optMailUser: "a@b.c", optRequeue: "false", optPriority: "qos:debug"},
		},
		{
			name:   "checkpoint directives: --signal and Lattice's hook and webhook",
			script: "#!/bin/sh\n#SBATCH --signal=B:USR1@90\n#SBATCH --checkpoint=webhook --checkpoint-webhook http://127.0.0.1:8/c\n#SBATCH --checkpoint-hook './save.sh now'\n",
			want: map[string]string{optSignal: "B:USR1@90", optCheckpoint: "webhook", optCkptWebhook: "http://127.0.0.1:8/c",
				optCkptHook: "./save.sh now"},
		},
		{
			name:     "directives after the first command are ignored, as in Slurm",
			script:   "#!/bin/sh\n#SBATCH -N 2\nhostname\n#SBATCH -N 5\n",
			want:     map[string]string{optNodes: "2"},
			warnings: []string{":4: #SBATCH after the first command is ignored"},
		},
		{
			name:   "#SBATCHX and indented #SBATCH are not directives",
			script: "#SBATCHX -N 3\n  #SBATCH -N 4\n#SBATCH\t-N 5\n",
			want:   map[string]string{optNodes: "5"},
		},
		{
			name:   "a known option without its value is an error",
			script: "#SBATCH --time\n",
			err:    "job.sh:1: #SBATCH --time needs a value",
		},
		{
			name:   "unterminated quote",
			script: "#SBATCH -J \"oops\n",
			err:    "unterminated",
		},
		{
			name:   "qos then priority-class: the later line wins",
			script: "#SBATCH --qos=low\n#SBATCH --priority-class=9\n",
			want:   map[string]string{optPriority: "class:9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := submitOptions{}
			warnings, err := parseSbatch("job.sh", tt.script, opts)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if ExitCode(err) != ExitUsage {
					t.Errorf("exit code %d, want 2", ExitCode(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for k, o := range opts {
				got[k] = o.value
				if !strings.HasPrefix(o.origin, "job.sh:") {
					t.Errorf("%s: origin %q does not name the script line", k, o.origin)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("options\n got %v\nwant %v", got, tt.want)
			}
			if len(warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %d like %q", warnings, len(tt.warnings), tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], w)
				}
			}
		})
	}
}

// dryRun runs `submit --dry-run -o json` and decodes the result.
func dryRun(t *testing.T, args ...string) (dryRunView, result) {
	t.Helper()
	r := run(t, nil, append([]string{"submit", "--dry-run", "-o", "json"}, args...)...)
	var v dryRunView
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("bad JSON %v:\n%s", err, r.stdout)
		}
	}
	return v, r
}

func TestSubmitWalltimeForms(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"30", 30 * 60},
		{"30:15", 30*60 + 15},
		{"2:03:04", 2*3600 + 3*60 + 4},
		{"1-12", 36 * 3600},
		{"1-02:30", 26*3600 + 30*60},
		{"2-00:00:10", 48*3600 + 10},
		{"90m", 90 * 60},
		{"1h30m", 5400},
	}
	for _, tt := range tests {
		for _, flag := range []string{"--walltime", "-t", "--time"} {
			t.Run(tt.in+flag, func(t *testing.T) {
				v, r := dryRun(t, flag, tt.in, "--", "true")
				mustCode(t, r, 0)
				if v.WalltimeSeconds != tt.want {
					t.Errorf("walltime_seconds %d, want %d", v.WalltimeSeconds, tt.want)
				}
			})
		}
	}
	t.Run("script form", func(t *testing.T) {
		v, r := dryRun(t, writeScript(t, "#!/bin/sh\n#SBATCH --time=1-00:01\ntrue\n"))
		mustCode(t, r, 0)
		if v.WalltimeSeconds != 86460 {
			t.Errorf("walltime_seconds %d, want 86460", v.WalltimeSeconds)
		}
	})
	t.Run("default one hour", func(t *testing.T) {
		v, r := dryRun(t, "--", "true")
		mustCode(t, r, 0)
		if v.WalltimeSeconds != 3600 || v.NodesMin != 1 || v.NodesMax != 1 || v.Tenant != "" || v.VCluster != "" {
			t.Errorf("defaults: %+v", v)
		}
	})
}

func TestSubmitInvalidInput(t *testing.T) {
	script := writeScript(t, "#!/bin/sh\n#SBATCH -t abc\ntrue\n")
	tests := []struct {
		name string
		args []string
		want string // substring of stderr
	}{
		{"nodes 0", []string{"--nodes", "0", "--", "true"}, `invalid nodes "0"`},
		{"nodes range backwards", []string{"-N", "4-2", "--", "true"}, `invalid nodes "4-2"`},
		{"walltime abc", []string{"--walltime", "abc", "--", "true"}, `invalid walltime "abc": allowed MM, MM:SS`},
		{"walltime in script names the line", []string{script}, `job.sh:2 (#SBATCH -t): invalid walltime "abc"`},
		{"priority class", []string{"--priority-class", "11", "--", "true"}, `invalid priority-class "11": allowed an integer 0..10`},
		{"qos", []string{"--qos", "go/ld", "--", "true"}, `invalid qos "go/ld": allowed a QOS name`},
		{"begin", []string{"--begin", "yesterday-ish", "--", "true"}, `invalid begin "yesterday-ish": allowed now+N`},
		{"nodelist", []string{"-w", "node[3-", "--", "true"}, `invalid nodelist "node[3-"`},
		{"nodelist smaller than nodes", []string{"-w", "node[1-2]", "-N", "3", "--", "true"}, `invalid nodes "3": allowed at most 2`},
		{"exclude", []string{"-x", "a,,b", "--", "true"}, `invalid exclude "a,,b"`},
		{"gpus", []string{"--gpus", "x", "--", "true"}, `invalid gpus "x"`},
		{"mail-type", []string{"--mail-type", "SOMETIMES", "--", "true"}, `invalid mail-type "SOMETIMES": allowed NONE, BEGIN`},
		{"checkpoint", []string{"--checkpoint", "maybe", "--", "true"}, `invalid checkpoint "maybe"`},
		{"signal name", []string{"--signal", "USR9@30", "--", "true"}, `invalid signal "USR9@30": allowed [{R|B}:]SIG[@SECONDS]`},
		{"signal seconds", []string{"--signal", "USR1@-5", "--", "true"}, `invalid signal "USR1@-5"`},
		{"hook mode needs a hook", []string{"--checkpoint", "hook", "--", "true"}, `invalid checkpoint-hook: allowed a command to run`},
		{"webhook mode needs a URL", []string{"--checkpoint", "webhook", "--checkpoint-webhook", "ftp://x", "--", "true"}, `invalid checkpoint-webhook "ftp://x": allowed an http:// or https:// URL`},
		{"dependency", []string{"-d", "afterok", "--", "true"}, `invalid depends-on`},
		{"dependency task id needs the server", []string{"-d", "afterok:12_3", "--", "true"}, `invalid depends-on "12_3"`},
		{"array", []string{"--array", "5-1", "--", "true"}, `invalid array "5-1"`},
		{"constraint", []string{"-C", "a|b", "--", "true"}, `invalid constraint "a|b"`},
		{"gres", []string{"--gres", "shard:2", "--", "true"}, `invalid gres "shard:2"`},
		{"gpus per node", []string{"--gpus-per-node", "x", "--", "true"}, `invalid gpus-per-node "x"`},
		{"tenant", []string{"-A", "bad name", "--", "true"}, `invalid tenant "bad name"`},
		{"output format", []string{"-o", "out_%j.txt", "--", "true"}, `(-o/--output is the output format; an output file is --stdout FILE)`},
		{"no entrypoint", []string{}, "submit needs a batch SCRIPT or a command after --"},
		{"unreadable script", []string{"no/such/job.sh"}, `SCRIPT "no/such/job.sh" is not a readable file (no such file or directory); to run a command, put it after --`},
		{"script is a directory", []string{"."}, `SCRIPT "." is not a readable file`},
		{"stdin among scripts", []string{"a.sh", "-"}, "standard input (-) can be the only SCRIPT"},
		{"script and command", []string{script, "--", "true"}, "give either SCRIPT or -- CMD"},
		{"empty command", []string{"--"}, "nothing after --"},
		{"unknown flag", []string{"--frobnicate", "--", "true"}, `unknown flag --frobnicate for "latticectl submit"`},
		{"two forms of one flag", []string{"-t", "5", "--walltime", "6", "--", "true"}, "Cannot use two forms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"submit", "--dry-run"}, tt.args...)
			r := run(t, nil, args...)
			mustCode(t, r, ExitUsage)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("want one error line, got:\n%s", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("nothing belongs on stdout, got %q", r.stdout)
			}
		})
	}
}

func TestSubmitFlagsWinOverScript(t *testing.T) {
	script := writeScript(t, "#!/bin/sh\n#SBATCH -N 2 -t 10 -J from-script -p hpc-batch -A physics\n"+
		"#SBATCH --qos=high -o script.out -e script.err --gres=gpu:a100:4 -C ib\n#SBATCH --frob=1\nsrun hostname\n")
	v, r := dryRun(t, "-N", "3-5", "--time", "1:00:00", "--job-name", "cli", "--partition", "ml-training", "--account", "chem",
		"--priority-class", "3", "--stdout", "cli.out", "--gpus-per-node", "2", script)
	mustCode(t, r, 0)
	want := dryRunView{Name: "cli", Tenant: "chem", VCluster: "ml-training", NodesMin: 3, NodesMax: 5, WalltimeSeconds: 3600,
		PriorityClass: 3, GPUType: "a100", GPUsPerNode: 2, Output: "cli.out", Error: "script.err", Constraints: []string{"ib"}}
	got := dryRunView{Name: v.Name, Tenant: v.Tenant, VCluster: v.VCluster, NodesMin: v.NodesMin, NodesMax: v.NodesMax,
		WalltimeSeconds: v.WalltimeSeconds, PriorityClass: v.PriorityClass, GPUType: v.GPUType, GPUsPerNode: v.GPUsPerNode,
		Output: v.Output, Error: v.Error, Constraints: v.Constraints}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolved\n got %+v\nwant %+v", got, want)
	}
	if len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "--frob=1") {
		t.Errorf("warnings %q, want one about --frob", v.Warnings)
	}
	if !strings.Contains(r.stderr, "warning: ") {
		t.Errorf("warnings belong on stderr too, got %q", r.stderr)
	}
	if v.EntrypointKind != "script" || v.Entrypoint != script || v.Command != nil {
		t.Errorf("entrypoint %q kind %q command %q", v.Entrypoint, v.EntrypointKind, v.Command)
	}
}

func TestSubmitOutputFlagIsFormatOnCommandLine(t *testing.T) {
	// -o on the command line is the output format, whatever the script says.
	script := writeScript(t, "#!/bin/sh\n#SBATCH -o job_%j.out\ntrue\n")
	for _, f := range []string{"json", "yaml"} {
		r := run(t, nil, "submit", "--dry-run", script, "-o", f)
		mustCode(t, r, 0)
		if !strings.Contains(r.stdout, "job_%j.out") || !strings.Contains(r.stdout, `walltime_seconds`) {
			t.Errorf("-o %s: %s", f, r.stdout)
		}
	}
	r := run(t, map[string]string{"LATTICE_OUTPUT": "yaml"}, "submit", "--dry-run", "--", "true")
	mustCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "name: \"true\"\n") {
		t.Errorf("LATTICE_OUTPUT=yaml: %s", r.stdout)
	}
	r = run(t, map[string]string{"LATTICE_OUTPUT": "yaml"}, "-o", "json", "submit", "--dry-run", "--", "true")
	mustCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "{") {
		t.Errorf("a global -o before the command must win over LATTICE_OUTPUT: %s", r.stdout)
	}
}

func TestSubmitResolves(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, v dryRunView)
	}{
		{"qos maps to a priority class", []string{"--qos", "urgent", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.PriorityClass != 10 {
				t.Errorf("priority %d", v.PriorityClass)
			}
		}},
		{"priority-class wins over qos on the command line", []string{"--priority-class", "1", "--qos", "high", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.PriorityClass != 1 {
				t.Errorf("priority %d", v.PriorityClass)
			}
		}},
		{"default priority is qos normal", []string{"--", "x"}, func(t *testing.T, v dryRunView) {
			if v.PriorityClass != DefaultPriorityClass {
				t.Errorf("priority %d", v.PriorityClass)
			}
		}},
		{"sbatch --signal alone means signal mode with that signal", []string{"--signal", "B:USR2@120", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.Checkpoint != "signal" || v.CheckpointSignal != "USR2" || v.CheckpointSignalSecs != 120 {
				t.Errorf("checkpoint %q signal %q@%d", v.Checkpoint, v.CheckpointSignal, v.CheckpointSignalSecs)
			}
		}},
		{"--signal without seconds: Slurm's 60", []string{"--signal", "SIGTERM", "--checkpoint", "hook", "--checkpoint-hook", "./ckpt.sh", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.Checkpoint != "hook" || v.CheckpointSignal != "SIGTERM" || v.CheckpointSignalSecs != 60 || v.CheckpointHook != "./ckpt.sh" {
				t.Errorf("%+v", v)
			}
		}},
		{"webhook", []string{"--checkpoint", "webhook", "--checkpoint-webhook", "http://127.0.0.1:9/ckpt", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.Checkpoint != "webhook" || v.CheckpointWebhook != "http://127.0.0.1:9/ckpt" {
				t.Errorf("%+v", v)
			}
		}},
		{"gres without type", []string{"--gres", "gpu:2", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.GPUsPerNode != 2 || v.GPUType != "" {
				t.Errorf("gpus %d %q", v.GPUsPerNode, v.GPUType)
			}
		}},
		{"gpu-type wins over gres type", []string{"--gres", "gpu:v100:1", "--gpu-type", "h100", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.GPUsPerNode != 1 || v.GPUType != "h100" {
				t.Errorf("gpus %d %q", v.GPUsPerNode, v.GPUType)
			}
		}},
		{"gpus-per-node with type", []string{"--gpus-per-node", "a100:8", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.GPUsPerNode != 8 || v.GPUType != "a100" {
				t.Errorf("gpus %d %q", v.GPUsPerNode, v.GPUType)
			}
		}},
		{"export list", []string{"--export", "ALL,OMP_NUM_THREADS=2,EXTRA=1", "--", "x"}, func(t *testing.T, v dryRunView) {
			want := []string{"EXTRA=1", "HOME=/home/alice", "OMP_NUM_THREADS=2", "PATH=/usr/bin"}
			if !reflect.DeepEqual(v.Env, want) {
				t.Errorf("env %q", v.Env)
			}
		}},
		{"export names", []string{"--export", "HOME,NOPE", "--", "x"}, func(t *testing.T, v dryRunView) {
			if !reflect.DeepEqual(v.Env, []string{"HOME=/home/alice"}) {
				t.Errorf("env %q", v.Env)
			}
		}},
		{"the submitting environment by default, as sbatch", []string{"--", "x"}, func(t *testing.T, v dryRunView) {
			if strings.Join(v.Env, " ") != "HOME=/home/alice OMP_NUM_THREADS=8 PATH=/usr/bin" {
				t.Errorf("env %q", v.Env)
			}
		}},
		{"no environment with NONE", []string{"--export", "NONE", "--", "x"}, func(t *testing.T, v dryRunView) {
			if len(v.Env) != 0 {
				t.Errorf("env %q", v.Env)
			}
		}},
		{"relative workdir", []string{"-D", "sub", "--", "x"}, func(t *testing.T, v dryRunView) {
			if v.WorkDir != "/home/alice/proj/sub" {
				t.Errorf("workdir %q", v.WorkDir)
			}
		}},
		{"constraint and dependencies", []string{"-C", "nvme&ib", "-d", "afterok:3:4,afterany:5", "--", "x"}, func(t *testing.T, v dryRunView) {
			if !reflect.DeepEqual(v.Constraints, []string{"ib", "nvme"}) || len(v.DependsOn) != 2 ||
				!reflect.DeepEqual(v.DependsOn[0].IDs, []uint64{3, 4}) || v.DependsOn[1].Condition != "afterany" {
				t.Errorf("constraints %q deps %+v", v.Constraints, v.DependsOn)
			}
		}},
		{"name defaults to the command", []string{"--", "/usr/bin/hostname", "-f"}, func(t *testing.T, v dryRunView) {
			if v.Name != "hostname" || v.Entrypoint != "/usr/bin/hostname -f" || v.EntrypointKind != "command" {
				t.Errorf("name %q entrypoint %q", v.Name, v.Entrypoint)
			}
		}},
		{"flags after the command's words belong to the command", []string{"--", "sh", "-c", "echo $X", "-N", "5"}, func(t *testing.T, v dryRunView) {
			if v.NodesMin != 1 || !reflect.DeepEqual(v.Command, []string{"sh", "-c", "echo $X", "-N", "5"}) || v.Entrypoint != "sh -c 'echo $X' -N 5" {
				t.Errorf("nodes %d command %q entrypoint %q", v.NodesMin, v.Command, v.Entrypoint)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, r := dryRun(t, tt.args...)
			mustCode(t, r, 0)
			tt.check(t, v)
		})
	}
	t.Run("tenant precedence: flag > script > env > user", func(t *testing.T) {
		script := writeScript(t, "#!/bin/sh\n#SBATCH -A fromscript\ntrue\n")
		env := map[string]string{"LATTICE_TENANT": "fromenv"}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--tenant", "fromflag", script}, "fromflag"},
			{[]string{script}, "fromscript"},
			{[]string{"--", "true"}, "fromenv"},
		} {
			r := run(t, env, append([]string{"submit", "--dry-run", "-o", "json"}, c.args...)...)
			mustCode(t, r, 0)
			var v dryRunView
			_ = json.Unmarshal([]byte(r.stdout), &v)
			if v.Tenant != c.want {
				t.Errorf("%v: tenant %q, want %q", c.args, v.Tenant, c.want)
			}
		}
		r := run(t, env, "--tenant", "global", "submit", "--dry-run", "-o", "json", script)
		var v dryRunView
		_ = json.Unmarshal([]byte(r.stdout), &v)
		if v.Tenant != "global" {
			t.Errorf("latticectl --tenant before the command: tenant %q", v.Tenant)
		}
	})
	t.Run("script from stdin", func(t *testing.T) {
		r := runIn(t, "#!/bin/sh\n#SBATCH -N 7\nhostname\n", nil, "submit", "--dry-run", "-o", "json", "-")
		mustCode(t, r, 0)
		var v dryRunView
		_ = json.Unmarshal([]byte(r.stdout), &v)
		if v.NodesMin != 7 || v.Name != "stdin" || v.EntrypointKind != "script" {
			t.Errorf("%+v", v)
		}
	})
}

// TestDryRunJSONShape pins the exact document CLI.md promises.
func TestDryRunJSONShape(t *testing.T) {
	script := writeScript(t, "#!/bin/bash\n#SBATCH --job-name=sim\n#SBATCH -N 2-8\n#SBATCH -t 2-06:00:00\n#SBATCH -p hpc-batch\n"+
		"#SBATCH -A physics\n#SBATCH --array=0-99:3%10\n#SBATCH -d afterok:12:13,afterany:14\n#SBATCH -C ib&nvme\n"+
		"#SBATCH --gres=gpu:a100:4\n#SBATCH -o sim_%A_%a.out\n#SBATCH -e sim_%A_%a.err\n#SBATCH --mem=64G\n./sim\n")
	r := run(t, nil, "submit", "--dry-run", "-o", "json", "--project", "fusion", "--checkpoint", "signal", "--qos", "high", script)
	mustCode(t, r, 0)
	want := `{
  "name": "sim",
  "tenant": "physics",
  "project": "fusion",
  "vcluster": "hpc-batch",
  "nodes_min": 2,
  "nodes_max": 8,
  "walltime_seconds": 194400,
  "priority_class": 8,
  "array": {
    "start": 0,
    "end": 99,
    "step": 3,
    "max_concurrent": 10
  },
  "depends_on": [
    {
      "condition": "afterok",
      "ids": [
        12,
        13
      ]
    },
    {
      "condition": "afterany",
      "ids": [
        14
      ]
    }
  ],
  "constraints": [
    "ib",
    "nvme"
  ],
  "gpu_type": "a100",
  "gpus_per_node": 4,
  "checkpoint": "signal",
  "entrypoint": "SCRIPT",
  "output": "sim_%A_%a.out",
  "error": "sim_%A_%a.err",
  "warnings": [],
  "entrypoint_kind": "script",
  "command": null,
  "script_bytes": 294,
  "work_dir": "/home/alice/proj",
  "env": [
    "HOME=/home/alice",
    "OMP_NUM_THREADS=8",
    "PATH=/usr/bin"
  ],
  "qos": "high",
  "mem_per_node_mb": 65536
}
`
	want = strings.ReplaceAll(want, "SCRIPT", script)
	if r.stdout != want {
		t.Errorf("dry-run JSON:\n%s\nwant:\n%s", r.stdout, want)
	}
	// The CLI.md keys come first, in CLI.md's order.
	keys := []string{"name", "tenant", "project", "vcluster", "nodes_min", "nodes_max", "walltime_seconds", "priority_class",
		"array", "depends_on", "constraints", "gpu_type", "gpus_per_node", "checkpoint", "entrypoint", "output", "error", "warnings"}
	last := -1
	for _, k := range keys {
		i := strings.Index(r.stdout, "\n  \""+k+"\":")
		if i <= last {
			t.Errorf("key %q missing or out of order", k)
		}
		last = i
	}
	// No array → null; no dependencies → [].
	v := run(t, nil, "submit", "--dry-run", "-o", "json", "--", "true")
	if !strings.Contains(v.stdout, `"array": null`) || !strings.Contains(v.stdout, `"depends_on": []`) || !strings.Contains(v.stdout, `"warnings": []`) {
		t.Errorf("empty values:\n%s", v.stdout)
	}
}

// TestSubmitSeveralScriptsInOneBatch: `submit a.sh b.sh c.sh` sends one
// SubmitBatch; ids come out one a line in order; a refused or unreadable
// script is reported on stderr, the others still go, and the exit code is 1.
func TestSubmitSeveralScriptsInOneBatch(t *testing.T) {
	f := newFakeServer(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.sh", "#!/bin/sh\n#SBATCH -N 2\ntrue\n")
	b := write("b.sh", "#!/bin/sh\n#SBATCH --array 0-2\ntrue\n")
	refused := write("r.sh", "#!/bin/sh\n#SBATCH -J refused\ntrue\n")

	r := run(t, servers(f.addr), "submit", "--parsable", "-t", "5", a, b)
	mustCode(t, r, 0)
	if r.stdout != "40\n41\n" {
		t.Fatalf("stdout %q, want the two ids one a line", r.stdout)
	}
	calls, _, _ := f.snapshot()
	if !slices.Contains(calls, "SubmitBatch") || slices.Contains(calls, "Submit") {
		t.Fatalf("calls %v, want one SubmitBatch", calls)
	}
	if n := f.submits[0].GetRequest().GetNodesMin(); n != 2 {
		t.Fatalf("first script's #SBATCH -N lost: %d nodes", n)
	}
	if f.submits[1].GetRequest().GetArray() == nil || f.submits[1].GetRequest().GetWalltimeSeconds() != 300 {
		t.Fatalf("second request %v", f.submits[1].GetRequest())
	}

	r = run(t, servers(f.addr), "submit", "-o", "json", a, refused, filepath.Join(dir, "missing.sh"))
	mustCode(t, r, ExitError)
	var views []submitView
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil || len(views) != 1 || views[0].Script != a {
		t.Fatalf("json %q: %v", r.stdout, err)
	}
	for _, want := range []string{"r.sh: invalid tenant: refused by the fake", "missing.sh", "2 scripts not submitted"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
}
