package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNewUserWalk is a Slurm user's first hour with latticectl, using only
// what --help shows: submit a script, watch it wait, find out why, read its
// output (both streams) and find it in history once it has ended.
//
// It also holds and releases it, shortens its time limit, cancels an
// array range and reads slurm-ID.out in the submit directory.
func TestNewUserWalk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	api := freeAddr(t)
	tourDev(t, dir, api, "--nodes", "2", "--groups", "1", "--vclusters", "hpc-batch")
	ctl := func(args ...string) string {
		t.Helper()
		out, errOut, code := tourCtl(t, api, args...)
		if code != 0 {
			t.Fatalf("latticectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return out
	}
	help := ctl("--help")
	for _, cmd := range []string{"submit", "status", "explain", "logs", "history", "cancel"} {
		if !strings.Contains(help, "   "+cmd) {
			t.Errorf("latticectl --help does not list %s:\n%s", cmd, help)
		}
	}
	if h := ctl("submit", "--help"); !strings.Contains(h, "--parsable") {
		t.Errorf("submit --help does not show --parsable:\n%s", h)
	}
	if h := ctl("history", "--help"); !strings.Contains(h, "--starttime") || !strings.Contains(h, "--state") {
		t.Errorf("history --help lacks its filters:\n%s", h)
	}

	// Someone else holds both nodes for a while.
	blocker := strings.TrimSpace(ctl("submit", "--parsable", "-N2", "-t5", "-Jbig", "--", "sleep", "60"))
	tourWaitState(t, api, blocker, "RUNNING")

	script := filepath.Join(dir, "first.sbatch")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH -N1\n#SBATCH -t2\n#SBATCH -J first\necho hello from $SLURM_JOB_ID\necho oops >&2\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(ctl("submit", "--parsable", "-D", dir, script))
	if out := ctl("status", id, "--format", "%i %t %R", "--no-header"); !strings.Contains(out, "PD") {
		t.Fatalf("status %s: %q, want it pending", id, out)
	}
	// Why does it wait? Its reason, and sprio's view of the queue.
	tourWaitFor(t, 20*time.Second, "an explanation for "+id, func() bool {
		out, _, _ := tourCtl(t, api, "explain", id)
		return strings.Contains(out, "Resources") || strings.Contains(out, "Priority")
	})
	if out := ctl("explain"); !strings.Contains(out, id) || !strings.Contains(out, "SCORE") {
		t.Errorf("explain without an id does not list %s:\n%s", id, out)
	}
	if out := ctl("status", "--start"); !strings.Contains(out, id) {
		t.Errorf("status --start does not list %s:\n%s", id, out)
	}
	// Hold it, see why it waits, release it, shorten its limit.
	ctl("hold", id)
	if out := ctl("status", id, "--format", "%t %R", "--no-header"); !strings.Contains(out, "JobHeld") {
		// dev's user is an admin: an admin hold, as root's scontrol hold.
		t.Errorf("status of a held job: %q, want JobHeldAdmin or JobHeldUser", out)
	}
	ctl("release", id)
	if out := ctl("status", id, "--format", "%R", "--no-header"); strings.Contains(out, "JobHeld") {
		t.Errorf("status after release: %q, still held", out)
	}
	ctl("update", id, "--time", "1")
	if out := ctl("status", id, "--format", "%l", "--no-header"); !strings.Contains(out, "1:00") {
		t.Errorf("time limit after update --time 1: %q", out)
	}

	ctl("cancel", blocker)
	tourWaitState(t, api, id, "COMPLETED")
	out, errOut, code := tourCtl(t, api, "logs", id)
	if code != 0 || !strings.Contains(out, "hello from "+id) || !strings.Contains(out+errOut, "oops") {
		t.Errorf("logs %s: exit %d, stdout %q, stderr %q; want both streams", id, code, out, errOut)
	}
	// sbatch's default output file, both streams, in the submit directory.
	slurmOut, err := os.ReadFile(filepath.Join(dir, "slurm-"+id+".out"))
	if err != nil || !strings.Contains(string(slurmOut), "hello from "+id) || !strings.Contains(string(slurmOut), "oops") {
		t.Errorf("slurm-%s.out: %q (%v); want stdout and stderr", id, slurmOut, err)
	}
	// An array whose tasks 2-3 are cancelled by range; the others run.
	arr := strings.TrimSpace(ctl("submit", "--parsable", "-D", dir, "--array", "0-3", "--hold", "-t1", "--", "true"))
	ctl("cancel", arr+"_[2-3]")
	for _, task := range []string{"_2", "_3"} {
		tourWaitState(t, api, arr+task, "CANCELLED")
	}
	ctl("release", arr+"_0", arr+"_1")
	for _, task := range []string{"_0", "_1"} {
		tourWaitState(t, api, arr+task, "COMPLETED")
	}

	var rows []struct {
		DisplayID      string `json:"display_id"`
		State          string `json:"state"`
		ElapsedSeconds int64  `json:"elapsed_seconds"`
		ExitCode       *int   `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(ctl("history", "-o", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, r := range rows {
		found[r.DisplayID] = r.State
		if r.DisplayID == id && (r.ExitCode == nil || *r.ExitCode != 0 || r.ElapsedSeconds > 30) {
			t.Errorf("history of %s: %+v", id, r)
		}
	}
	if found[id] != "COMPLETED" || found[blocker] != "CANCELLED" {
		t.Errorf("history: %v; want %s COMPLETED and %s CANCELLED", found, id, blocker)
	}
	want := strings.Join([]string{blocker, arr + "_2", arr + "_3"}, "\n")
	if out := ctl("history", "--state", "CA", "--format", "id", "--no-header"); strings.TrimSpace(out) != want {
		t.Errorf("history --state CA: %q, want %q", out, want)
	}
}

func tourWaitState(t *testing.T, api, id, state string) {
	t.Helper()
	tourWaitFor(t, 40*time.Second, id+" "+state, func() bool {
		out, _, _ := tourCtl(t, api, "status", id, "--format", "%T", "--no-header")
		return strings.TrimSpace(out) == state
	})
}

func tourWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
