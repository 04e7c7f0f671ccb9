package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tourDev starts `latticed dev` with args on fresh addresses and waits for
// its ready line; it returns the process and the API address.
func tourDev(t *testing.T, dir, api string, args ...string) (*proc, time.Duration) {
	t.Helper()
	logPath := filepath.Join(dir, "dev.log")
	before, _ := os.ReadFile(logPath)
	start := time.Now()
	p := startProc(t, logPath, "dev", append([]string{"dev", "--data-dir", filepath.Join(dir, "data"), "--api", api, "--metrics", ""}, args...)...)
	t.Cleanup(func() { p.stop(15 * time.Second) })
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b[len(before):]), "lattice dev ready:") {
			return p, time.Since(start)
		}
		if p.exited() {
			t.Fatalf("latticed dev exited: %v\n%s", p.err, tail(logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("latticed dev not ready after 45s:\n%s", tail(logPath, 30))
	return nil, 0
}

// tourCtl runs latticectl against api and returns its stdout, stderr and
// exit code.
func tourCtl(t *testing.T, api string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(buildLatticectl(t), args...)
	cmd.Env = append(childEnv(), "LATTICE_SERVER="+api)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestReadmeTour runs the README's "short tour" and "DAG workflows" blocks
// as written (bash, set -e) against a fresh `latticed dev --demo`: every
// command must succeed, with the files it names found from the
// repository's root.
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The tour, then the DAG workflow block, as one script.
	var block string
	for _, section := range []string{"## A short tour", "### DAG workflows"} {
		_, rest, ok := strings.Cut(string(readme), section)
		if !ok {
			t.Fatalf("README has no %q section", section)
		}
		_, rest, _ = strings.Cut(rest, "```sh\n")
		b, _, _ := strings.Cut(rest, "```")
		block += b
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "go build ") {
			continue // the test built the binaries; they are on PATH
		}
		lines = append(lines, l)
	}
	dir := t.TempDir()
	// The tour runs in a directory that looks like the repository's root
	// (its files are found the same way) so job output stays out of the tree.
	work := filepath.Join(dir, "repo")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"examples", "testdata", "deploy"} {
		abs, _ := filepath.Abs(filepath.Join("../..", d))
		if err := os.Symlink(abs, filepath.Join(work, d)); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "tour.sh")
	if err := os.WriteFile(script, []byte("set -ex\n"+strings.Join(lines, "\n")), 0o755); err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	dev, _ := tourDev(t, dir, api, "--demo")
	// The ready line tells a newcomer how to reach this non-default API.
	if log, _ := os.ReadFile(filepath.Join(dir, "dev.log")); !strings.Contains(string(log), "export LATTICE_SERVER="+api+"; latticectl status") {
		t.Errorf("the dev log does not say how to reach --api %s:\n%s", api, log)
	}
	bin := filepath.Dir(buildLatticectl(t))
	cmd := exec.Command("bash", script)
	cmd.Dir = work
	// Where USER is unset (a container, cron): the tour's -u "$USER" is you.
	var env []string
	for _, kv := range childEnv() {
		if !strings.HasPrefix(kv, "USER=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "LATTICE_SERVER="+api, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README tour failed: %v\n%s", err, out)
	}
	for _, want := range []string{"hello-batch", "SCORE", "EXPECTED_START", "ELAPSED", "avg wait", "training-pipeline",
		"INACTIVE"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
	// Started again with the same command, dev does not submit the demo again.
	count := func() int {
		out, _, _ := tourCtl(t, api, "status", "--name", "hello,wide,fails", "--no-header", "--format", "%i")
		return len(strings.Fields(out))
	}
	before := count()
	if !dev.stop(20 * time.Second) {
		t.Fatal("latticed dev did not stop on SIGTERM")
	}
	tourDev(t, dir, api, "--demo")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if log, _ := os.ReadFile(filepath.Join(dir, "dev.log")); strings.Contains(string(log), "the demo was submitted at the first start") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, "dev.log")); !strings.Contains(string(log), "the demo was submitted at the first start") {
		t.Errorf("the restarted dev did not say the demo was submitted before:\n%s", tail(filepath.Join(dir, "dev.log"), 20))
	}
	if after := count(); after != before || before != 3 {
		t.Errorf("demo jobs hello, wide, fails: %d before the restart, %d after (want 3 and 3)", before, after)
	}
}

// TestDevRestart: `latticed dev` stopped with a running job and a drained
// node starts again at once (it used to wait 60 s for every node to be
// Ready, then exit); the drain survives; the job's record ends when dev
// stopped, so its elapsed time holds no downtime.
func TestDevRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir := t.TempDir()
	api := freeAddr(t)
	devArgs := []string{"--nodes", "4", "--groups", "1", "--vclusters", "hpc-batch"}
	var devs []*proc
	dev, _ := tourDev(t, dir, api, devArgs...)
	if _, errOut, code := tourCtl(t, api, "nodes", "drain", "node004", "--reason", "bad DIMM"); code != 0 {
		t.Fatalf("drain: %d %s", code, errOut)
	}
	id, errOut, code := tourCtl(t, api, "submit", "--parsable", "-N1", "-t10", "-Jlong", "--", "sleep", "300")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	id = strings.TrimSpace(id)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ := tourCtl(t, api, "status", id, "--format", "%T", "--no-header")
		if strings.TrimSpace(out) == "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not running: %q", id, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	stopped := time.Now()
	if !dev.stop(20 * time.Second) {
		t.Fatal("latticed dev did not stop on SIGTERM")
	}
	time.Sleep(3 * time.Second) // downtime that must not count
	second, took := tourDev(t, dir, api, devArgs...)
	devs = append(devs, second)
	if took > 20*time.Second {
		t.Errorf("restart with a drained node took %s", took)
	}
	out, _, _ := tourCtl(t, api, "nodes", "show", "node004", "-o", "json")
	if !strings.Contains(out, `"state": "Drained"`) {
		t.Errorf("the drain did not survive the restart: %s", out)
	}
	out, errOut, code = tourCtl(t, api, "history", id, "-o", "json")
	if code != 0 {
		t.Fatalf("history: %d %s", code, errOut)
	}
	var rows []struct {
		State          string  `json:"state"`
		EndTime        *string `json:"end_time"`
		ElapsedSeconds int64   `json:"elapsed_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("history %s: %v %s", id, err, out)
	}
	if rows[0].State != "FAILED" || rows[0].EndTime == nil {
		t.Fatalf("job %s after the stop: %+v", id, rows[0])
	}
	end, _ := time.Parse(time.RFC3339, *rows[0].EndTime)
	if end.After(stopped.Add(2 * time.Second)) {
		t.Errorf("job %s ended at %s, but dev stopped at %s: the downtime counts", id, end, stopped)
	}

	// A crash (SIGKILL to dev alone): the job runs on under its supervisor
	// and ends while dev is down; the restarted dev records when it ended.
	dev = devs[len(devs)-1]
	short, errOut, code := tourCtl(t, api, "submit", "--parsable", "-N1", "-t5", "-Jshort", "--", "sleep", "3")
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	short = strings.TrimSpace(short)
	tourWaitState(t, api, short, "RUNNING")
	if err := syscall.Kill(dev.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dev.done
	time.Sleep(6 * time.Second) // the job ends meanwhile; the downtime must not count
	tourDev(t, dir, api, devArgs...)
	tourWaitState(t, api, short, "COMPLETED")
	out, _, _ = tourCtl(t, api, "history", short, "-o", "json")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("history %s: %v %s", short, err, out)
	}
	if rows[0].ElapsedSeconds > 5 {
		t.Errorf("job %s ran 3 s while dev was down, history says %d s", short, rows[0].ElapsedSeconds)
	}
}
