package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// Scripts in the style of several centres' documentation (written for this
// test): site QOS names, node lists, begin times, mail, the default output.
func TestSiteStyleScriptsDryRun(t *testing.T) {
	dead := deadAddr(t)
	tests := []struct {
		name, script string
		check        func(t *testing.T, v dryRunView, stderr string)
	}{
		{"perlmutter-style debug qos with a site account", "#!/bin/bash\n#SBATCH -A m0000\n#SBATCH -q debug\n#SBATCH -C cpu\n#SBATCH -N 2\n#SBATCH -t 00:30:00\nsrun ./a.out\n",
			func(t *testing.T, v dryRunView, _ string) {
				if v.QOS != "debug" || v.PriorityClass != 8 || v.NodesMin != 2 || !slices.Equal(v.Constraints, []string{"cpu"}) || v.Output != "slurm-%j.out" || v.Error != "" {
					t.Errorf("%+v", v)
				}
			}},
		{"a QOS only the site knows is kept, with a warning", "#!/bin/bash\n#SBATCH --qos=regular\n#SBATCH --partition=standard\nhostname\n",
			func(t *testing.T, v dryRunView, stderr string) {
				if v.QOS != "regular" || v.VCluster != "standard" || v.PriorityClass != DefaultPriorityClass || !strings.Contains(stderr, `qos "regular" is not a built-in name`) {
					t.Errorf("%+v %s", v, stderr)
				}
			}},
		{"array output default", "#!/bin/bash\n#SBATCH --array=1-4\n#SBATCH -e err-%A_%a.txt\nhostname\n",
			func(t *testing.T, v dryRunView, _ string) {
				if v.Output != "slurm-%A_%a.out" || v.Error != "err-%A_%a.txt" {
					t.Errorf("%+v", v)
				}
			}},
		{"nodelist, exclude, begin, hold, gpus, mail", "#!/bin/bash\n#SBATCH -w gpu[01-02]\n#SBATCH -x gpu02\n#SBATCH --begin=now+1hour\n#SBATCH -H\n#SBATCH -G a100:8\n" +
			"#SBATCH --mail-type=END,FAIL\n#SBATCH --mail-user=someone@example.org\nhostname\n",
			func(t *testing.T, v dryRunView, stderr string) {
				if !slices.Equal(v.NodeList, []string{"gpu01", "gpu02"}) || !slices.Equal(v.ExcludeNodes, []string{"gpu02"}) {
					t.Errorf("node lists %v %v", v.NodeList, v.ExcludeNodes)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeTemp(t, "job.sh", tc.script)
			r := run(t, map[string]string{"LATTICE_SERVER": dead}, "submit", "--dry-run", "-o", "json", path)
			if tc.name == "nodelist, exclude, begin, hold, gpus, mail" {
				// -w names 2 nodes, -x takes one of them away: 2 nodes cannot fit.
				mustCode(t, r, 2)
				if !strings.Contains(r.stderr, "at most 1: --nodelist names 1 node(s) not excluded") {
					t.Fatalf("stderr %s", r.stderr)
				}
				return
			}
			mustCode(t, r, 0)
			var v dryRunView
			if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
				t.Fatal(err)
			}
			tc.check(t, v, r.stderr)
		})
	}
	// The same options on the command line and in a script give the same request.
	script := writeTemp(t, "job.sh", "#!/bin/bash\n#SBATCH -w gpu[01-02]\n#SBATCH --begin=now+1hour\n#SBATCH -H\n#SBATCH -G a100:8\n#SBATCH --mail-type=END\n#SBATCH --no-requeue\nhostname\n")
	plain := writeTemp(t, "plain.sh", "#!/bin/bash\nhostname\n")
	a := run(t, map[string]string{"LATTICE_SERVER": dead}, "submit", "--dry-run", "-o", "json", script)
	b := run(t, map[string]string{"LATTICE_SERVER": dead}, "submit", "--dry-run", "-o", "json", "-w", "gpu[01-02]", "--begin", "now+1hour", "-H", "-G", "a100:8", "--mail-type", "END", "--no-requeue", plain)
	mustCode(t, a, 0)
	mustCode(t, b, 0)
	var va, vb dryRunView
	_ = json.Unmarshal([]byte(a.stdout), &va)
	_ = json.Unmarshal([]byte(b.stdout), &vb)
	va.Entrypoint, vb.Entrypoint, va.ScriptBytes, vb.ScriptBytes, va.Name, vb.Name = "", "", 0, 0, "", ""
	va.Warnings, vb.Warnings = nil, nil
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	if string(ja) != string(jb) {
		t.Errorf("script and flags differ:\n%s\n%s", ja, jb)
	}
	if va.NodesMin != 2 || va.GPUsPerNode != 4 || va.GPUType != "a100" || !va.Hold || va.Begin == nil || !va.Begin.Equal(t0.Add(time.Hour)) || va.MailType != "END" {
		t.Errorf("%+v", va)
	}
	if !strings.Contains(a.stderr, "mail is sent only where the site configured a mail hook") {
		t.Errorf("no mail warning: %s", a.stderr)
	}
}

func TestExpandIDs(t *testing.T) {
	got, err := expandIDs([]string{"12", "13_4", "152_[5-7]", "9_[1,3-4]"})
	want := []string{"12", "13_4", "152_5", "152_6", "152_7", "9_1", "9_3", "9_4"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	for _, bad := range []string{"x", "12_[", "12_[7-5]", "12_[a]", "12_[1-99999999]", "_[1]"} {
		if _, err := expandIDs([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The job-control commands against the fake server: what they send, what
// they print, their exit codes.
func TestJobControlCommands(t *testing.T) {
	f := newFakeServer(t)
	srv := map[string]string{"LATTICE_SERVER": f.addr}
	r := run(t, srv, "hold", "12", "13_[1-2]")
	mustCode(t, r, 0)
	if got := f.lastControl(); !slices.Equal(got.GetIds(), []string{"12", "13_1", "13_2"}) {
		t.Fatalf("hold sent %v", got.GetIds())
	}
	if !strings.Contains(r.stderr, "held 13_2") {
		t.Errorf("stderr %s", r.stderr)
	}
	r = run(t, srv, "release", "999", "-o", "json")
	mustCode(t, r, ExitNotFound)
	var views []controlView
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil || len(views) != 1 || views[0].OK || views[0].Error == "" {
		t.Fatalf("release json %s %v", r.stdout, err)
	}
	mustCode(t, run(t, srv, "requeue", "12"), 0)
	mustCode(t, run(t, srv, "requeue", "--hold", "12"), 0)
	if got := f.lastControl(); !got.GetHold() {
		t.Fatalf("requeue --hold sent %+v", got)
	}
	mustCode(t, run(t, srv, "requeue", "busy"), ExitUsage)
	mustCode(t, run(t, srv, "hold"), ExitUsage)
	r = run(t, srv, "signal", "12", "USR1")
	mustCode(t, r, 0)
	if s := f.lastSignal(); s.GetSignal() != "USR1" || !slices.Equal(s.GetIds(), []string{"12"}) {
		t.Fatalf("signal sent %+v", s)
	}
	mustCode(t, run(t, srv, "signal", "12", "NOPE"), ExitUsage)
	mustCode(t, run(t, srv, "signal", "12"), ExitUsage)
	r = run(t, srv, "update", "12", "--time", "30", "--nodes", "2-4", "--name", "x", "--begin", "now+1hour")
	mustCode(t, r, 0)
	u := f.lastUpdate()
	if u.GetWalltimeSeconds() != 1800 || u.GetNodesMin() != 2 || u.GetNodesMax() != 4 || u.GetName() != "x" || u.GetBeginUnixMs() != t0.Add(time.Hour).UnixMilli() {
		t.Fatalf("update sent %+v", u)
	}
	mustCode(t, run(t, srv, "update", "12", "--time", "abc"), ExitUsage)
	mustCode(t, run(t, srv, "update", "12", "--priority-class", "11"), ExitUsage)
	r = run(t, srv, "qos", "list", "-o", "json")
	mustCode(t, r, 0)
	var qs []qosView
	if err := json.Unmarshal([]byte(r.stdout), &qs); err != nil || len(qs) != 1 || qs[0].Name != "debug" || qs[0].MaxWalltimeSecs != 1800 {
		t.Fatalf("qos list %s %v", r.stdout, err)
	}
	r = run(t, srv, "qos", "list")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "00:30:00") {
		t.Fatalf("qos list table %s", r.stdout)
	}
	mustCode(t, run(t, srv, "qos", "set", "premium", "--priority-class", "9", "--max-walltime", "2-00:00"), 0)
	mustCode(t, run(t, srv, "qos", "set", "premium", "--priority-class", "12"), ExitUsage)
	r = run(t, srv, "partition", "list", "-o", "json")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, `"vcluster": "hpc-batch"`) {
		t.Fatalf("partition list %s", r.stdout)
	}
	mustCode(t, run(t, srv, "partition", "set", "regular", "hpc-batch"), 0)
	// cancel by filter: only the matching, unended allocations.
	r = run(t, srv, "cancel", "--state", "PD", "-o", "json")
	mustCode(t, r, 0)
	if c := f.lastCancel(); !slices.Equal(c.GetIds(), []string{"13"}) { // 13 is the fake's one pending allocation
		t.Errorf("cancel --state PD sent %v", c.GetIds())
	}
	r = run(t, srv, "cancel", "--name", "nothing-has-this-name")
	mustCode(t, r, 0)
	if !strings.Contains(r.stderr, "nothing matches") {
		t.Errorf("stderr %s", r.stderr)
	}
	mustCode(t, run(t, srv, "cancel"), ExitUsage)
}
