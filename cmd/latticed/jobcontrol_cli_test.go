package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJobControlFromTheCommandLine runs `latticed dev` and latticectl as a
// user would (issue 12): hold and release, update, requeue, signal, cancel
// by array range and by filter, --begin, -w, -x, a request that never fits,
// the QOS table, slurm-%j.out in the submit directory, and the object
// rules for a plain user.
func TestJobControlFromTheCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(childEnv(), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	api, metrics := freeAddr(t), freeAddr(t)
	logPath := filepath.Join(dir, "dev.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(latticedBin, "dev", "--data-dir", filepath.Join(dir, "dev"), "--nodes", "8", "--groups", "2",
		"--vclusters", "hpc-batch:4,ml-training:4", "--grace", "2s", "--api", api, "--metrics", metrics)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "dev", logPath: logPath, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(10 * time.Second) })
	waitHTTP(t, "http://"+metrics+"/readyz", 30*time.Second, p)

	ctlAs := func(env []string, args ...string) (string, int) {
		t.Helper()
		c := exec.Command(buildLatticectl(t), append([]string{"--server", api}, args...)...)
		c.Env, c.Dir = env, work
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	ctl := func(args ...string) string {
		t.Helper()
		out, code := ctlAs(env, args...)
		if code != 0 {
			t.Fatalf("latticectl %s: exit %d: %s", strings.Join(args, " "), code, out)
		}
		return out
	}
	type alloc struct {
		State     string   `json:"state"`
		Reason    string   `json:"reason"`
		Nodes     []string `json:"nodes"`
		Walltime  int64    `json:"walltime_seconds"`
		StartTime *string  `json:"start_time"`
	}
	show := func(id string) alloc {
		t.Helper()
		var a alloc
		out, code := ctlAs(env, "show", id, "-o", "json")
		if code != 0 {
			t.Fatalf("show %s: exit %d: %s", id, code, out)
		}
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatalf("show %s: %v: %s", id, err, out)
		}
		return a
	}
	waitState := func(id, state string) alloc {
		t.Helper()
		var a alloc
		deadline := time.Now().Add(30 * time.Second)
		for a = show(id); a.State != state; a = show(id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s (%s), want %s", id, a.State, a.Reason, state)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return a
	}
	submit := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(ctl(append([]string{"submit", "--parsable"}, args...)...))
	}

	// A batch script, held at submit: it waits, JobHeldUser, until released;
	// its stdout and stderr land in slurm-ID.out in the submit directory.
	script := filepath.Join(work, "job.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH -J held\n#SBATCH --hold\necho to-stdout\necho to-stderr >&2\n"), 0o755)
	id := submit("job.sh")
	time.Sleep(time.Second)
	if a := show(id); a.State != "PENDING" || a.Reason != "JobHeldUser" {
		t.Fatalf("held job: %+v", a)
	}
	ctl("release", id)
	waitState(id, "COMPLETED")
	if b, err := os.ReadFile(filepath.Join(work, "slurm-"+id+".out")); err != nil || string(b) != "to-stdout\nto-stderr\n" {
		t.Fatalf("slurm-%s.out: %q %v", id, b, err)
	}

	// update: a running job's time limit shrinks.
	id = submit("-t", "10", "--", "sleep", "60")
	waitState(id, "RUNNING")
	ctl("update", id, "--time", "5")
	if a := show(id); a.Walltime != 300 {
		t.Fatalf("walltime after update: %d", a.Walltime)
	}
	// requeue: stopped, back in the queue, running again.
	ctl("requeue", id)
	deadline := time.Now().Add(30 * time.Second)
	for out := ctl("show", id); !strings.Contains(out, "Requeued"); out = ctl("show", id) {
		if time.Now().After(deadline) {
			t.Fatalf("not requeued: %s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitState(id, "RUNNING")
	// signal: TERM ends the sleep.
	ctl("signal", id, "TERM")
	waitState(id, "FAILED")

	// cancel an array range, then the rest by filter.
	arr := submit("--array", "0-5", "-J", "sweep", "--", "sleep", "60")
	out := ctl("cancel", arr+"_[1-2]")
	if !strings.Contains(out, "cancelled "+arr+"_1") || !strings.Contains(out, "cancelled "+arr+"_2") {
		t.Fatalf("cancel range: %s", out)
	}
	waitState(arr+"_1", "CANCELLED")
	ctl("cancel", "--name", "sweep")
	for _, i := range []string{"0", "3", "4", "5"} {
		waitState(arr+"_"+i, "CANCELLED")
	}

	// --begin now+5s: not started before then.
	begin := time.Now().Add(5 * time.Second)
	id = submit("--begin", "now+5s", "--", "true")
	if a := show(id); a.State != "PENDING" || a.Reason != "BeginTime" {
		t.Fatalf("begin: %+v", a)
	}
	a := waitState(id, "COMPLETED")
	if st, err := time.Parse(time.RFC3339, *a.StartTime); err != nil || st.Before(begin.Truncate(time.Second)) {
		t.Fatalf("started %v, before its begin time %v", *a.StartTime, begin)
	}

	// -w runs on exactly those nodes; -x keeps off them.
	for range 2 {
		a := waitState(submit("-w", "node00[3-4]", "--", "true"), "COMPLETED")
		if strings.Join(a.Nodes, ",") != "node003,node004" {
			t.Fatalf("-w node00[3-4] ran on %v", a.Nodes)
		}
		a = waitState(submit("-x", "node00[1-3]", "--", "true"), "COMPLETED")
		if strings.Join(a.Nodes, ",") != "node004" {
			t.Fatalf("-x node00[1-3] ran on %v", a.Nodes)
		}
	}

	// Never fits: refused with exit 2, naming the size and the maximum.
	if out, code := ctlAs(env, "submit", "-N", "60", "--", "true"); code != 2 || !strings.Contains(out, "nodes: 60 requested, vCluster hpc-batch can have at most 4") {
		t.Fatalf("60 nodes: exit %d: %s", code, out)
	}

	// The QOS table: a site name works once an admin adds it.
	if out, code := ctlAs(env, "submit", "--qos", "premium", "--", "true"); code != 2 || !strings.Contains(out, `invalid qos "premium"`) {
		t.Fatalf("unknown qos: exit %d: %s", code, out)
	}
	ctl("qos", "set", "premium", "--priority-class", "7", "--max-nodes", "2")
	if out := ctl("qos", "list"); !strings.Contains(out, "premium") || !strings.Contains(out, "debug") {
		t.Fatalf("qos list: %s", out)
	}
	if out, code := ctlAs(env, "submit", "--qos", "premium", "-N", "3", "--", "true"); code != 2 || !strings.Contains(out, "at most 2 in qos premium") {
		t.Fatalf("qos limit: exit %d: %s", code, out)
	}
	waitState(submit("--qos", "premium", "--", "true"), "COMPLETED")

	// A plain user: holds their own work, not an admin's hold, not others'.
	tokOut, err := exec.Command(latticedBin, "token", "create", "--data-dir", filepath.Join(dir, "dev"), "--tenant", "demo", "--role", "user", "alice").Output()
	if err != nil {
		t.Fatal(err)
	}
	alice := append(slicesClone(env), "LATTICE_TOKEN="+strings.TrimSpace(string(tokOut)))
	time.Sleep(1500 * time.Millisecond) // the member reloads its tokens file every second
	mine, code := ctlAs(alice, "submit", "--parsable", "-A", "demo", "--begin", "now+1hour", "--", "true")
	if code != 0 {
		t.Fatalf("alice submit: %s", mine)
	}
	mine = strings.TrimSpace(mine)
	if out, code := ctlAs(alice, "hold", mine); code != 0 {
		t.Fatalf("alice holds her own: exit %d: %s", code, out)
	}
	if a := show(mine); a.Reason != "JobHeldUser" {
		t.Fatalf("alice's hold: %+v", a)
	}
	ctl("hold", mine) // an admin's hold on top
	if out, code := ctlAs(alice, "release", mine); code == 0 || !strings.Contains(out, "only an admin can release it") {
		t.Fatalf("alice releases an admin hold: exit %d: %s", code, out)
	}
	theirs := submit("--hold", "--", "true")
	if out, code := ctlAs(alice, "release", theirs); code == 0 || !strings.Contains(out, "permission denied") {
		t.Fatalf("alice releases another's job: exit %d: %s", code, out)
	}
	if out, code := ctlAs(alice, "qos", "set", "mine", "--priority-class", "10"); code == 0 || !strings.Contains(out, "permission denied") {
		t.Fatalf("alice sets a qos: exit %d: %s", code, out)
	}
	ctl("cancel", mine, theirs)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
