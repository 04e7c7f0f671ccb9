package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	latticecli "github.com/latticehpc/lattice/cli"
	"github.com/latticehpc/lattice/power"
	"github.com/latticehpc/lattice/replay"
)

func init() { latticecli.ReplayAction = Replay } // as cmd/latticectl-offline

// runError is a failed run: its exit code and what it printed on stderr.
type runError struct {
	code   int
	stderr string
}

func (e *runError) Error() string { return e.stderr }

const ExitUsage = latticecli.ExitUsage

// ExitCode is the exit code of a run's error (0 for nil).
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	return err.(*runError).code
}

// runReplayCmd runs latticectl ARGS... in this process, with replay linked
// in as latticectl-offline has it, and returns stdout, stderr and, when
// the exit code is not 0, a *runError.
func runReplayCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := latticecli.OSEnv()
	env.Stdin, env.Stdout, env.Stderr = strings.NewReader(""), &out, &errOut
	if code := latticecli.Main(context.Background(), env, args); code != 0 {
		return out.String(), errOut.String(), &runError{code, errOut.String()}
	}
	return out.String(), errOut.String(), nil
}

// TestReplayDefaultsAreReplays: latticectl defines replay's flags without
// linking package replay; their defaults are replay's own.
func TestReplayDefaultsAreReplays(t *testing.T) {
	if latticecli.ReplayDefaultPolicy != replay.PolicyLattice || latticecli.ReplayDefaultGroupSize != replay.DefaultGroupSize ||
		latticecli.ReplayDefaultSweepTolerance != replay.DefaultSweepTolerance {
		t.Errorf("cli's replay defaults %q %d %v, replay's %q %d %v", latticecli.ReplayDefaultPolicy, latticecli.ReplayDefaultGroupSize,
			latticecli.ReplayDefaultSweepTolerance, replay.PolicyLattice, replay.DefaultGroupSize, replay.DefaultSweepTolerance)
	}
	if replay.DefaultShift() != power.DefaultShift() {
		t.Errorf("replay's energy defaults %+v, the flags' (power's) %+v", replay.DefaultShift(), power.DefaultShift())
	}
}

// tinySWF is four jobs on 4 nodes (job, submit, run, procs, req time, user).
func tinySWF(t *testing.T, extra string) string {
	t.Helper()
	lines := []string{
		"; MaxProcs: 4",
		"1 0 -1 10 2 -1 -1 2 10 -1 1 1 -1 -1 -1 -1 -1 -1",
		"2 1 -1 10 3 -1 -1 3 10 -1 1 2 -1 -1 -1 -1 -1 -1",
		"3 2 -1 10 4 -1 -1 4 10 -1 1 1 -1 -1 -1 -1 -1 -1",
		"4 3 -1 30 1 -1 -1 1 30 -1 1 2 -1 -1 -1 -1 -1 -1",
	}
	if extra != "" {
		lines = append(lines, extra)
	}
	path := filepath.Join(t.TempDir(), "tiny.swf")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReplayJSONShape(t *testing.T) {
	trace := tinySWF(t, "")
	out, stderr, err := runReplayCmd(t, "-o", "json", "replay", "--policy", "fcfs,easy", trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, out)
	}
	keys := []string{"policy", "jobs", "capacity", "avg_wait_s", "p50_wait_s", "p95_wait_s", "p99_wait_s", "max_wait_s", "users",
		"avg_bounded_slowdown", "utilization", "makespan_s", "idle", "jain_fairness", "multi_group_jobs", "wall_seconds"}
	if len(got) != 2 || got[0]["policy"] != "fcfs" || got[1]["policy"] != "easy" {
		t.Fatalf("got %v", got)
	}
	for _, k := range keys {
		if _, ok := got[0][k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if _, ok := got[0]["fairness"]; !ok || len(got[0]) != len(keys)+1 {
		t.Errorf("%d keys, want %d and fairness: %v", len(got[0]), len(keys), got[0])
	}
	if _, ok := got[1]["fairness"]; ok || len(got[1]) != len(keys) {
		t.Errorf("easy: %d keys, want %d without fairness: %v", len(got[1]), len(keys), got[1])
	}
	idle, _ := got[0]["idle"].(map[string]any)
	for _, k := range []string{"no_fit", "held", "empty"} {
		if _, ok := idle[k].(float64); !ok {
			t.Errorf("idle.%s missing: %v", k, got[0]["idle"])
		}
	}
	// The schedules of replay's baseline test: fcfs starts 0,10,20,30; easy 0,10,33,3.
	if got[0]["avg_wait_s"].(float64) != (0+9+18+27)/4.0 || got[1]["avg_wait_s"].(float64) != (0+9+31+0)/4.0 {
		t.Errorf("avg waits %v %v", got[0]["avg_wait_s"], got[1]["avg_wait_s"])
	}

	out, _, err = runReplayCmd(t, "-o", "json", "replay", "--policy", "easy", trace)
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("one policy: want one object, got %v %s", err, out)
	}
}

func TestReplayTableAndPlots(t *testing.T) {
	dir := t.TempDir()
	out, stderr, err := runReplayCmd(t, "replay", "--policy", "fcfs,easy,conservative", "--plot", dir, tinySWF(t, ""))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "FCFS") || !strings.Contains(out, "CONSERVATIVE") || !strings.Contains(out, "avg bounded slowdown") {
		t.Errorf("table:\n%s", out)
	}
	for _, f := range []string{"queue.png", "utilization.png", "wait.png", "wait_cdf.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

func TestReplayMalformedTrace(t *testing.T) {
	trace := tinySWF(t, "5 4 -1 oops 1 -1 -1 1 30 -1 1 2 -1 -1 -1 -1 -1 -1")
	_, _, err := runReplayCmd(t, "replay", "--policy", "fcfs", trace)
	if err == nil || !strings.Contains(err.Error(), "line 6") || ExitCode(err) != ExitUsage {
		t.Fatalf("error %v (exit %d), want a usage error naming line 6", err, ExitCode(err))
	}
	_, stderr, err := runReplayCmd(t, "replay", "--policy", "fcfs", "--lenient", trace)
	if err != nil || !strings.Contains(stderr, "1 malformed lines skipped") {
		t.Fatalf("lenient: %v, stderr %q", err, stderr)
	}
}

func TestReplayUsageErrors(t *testing.T) {
	trace := tinySWF(t, "")
	for _, args := range [][]string{
		{"replay"},
		{"replay", "--policy", "sjf", trace},
		{"replay", "--reservation-depth", "-4", trace},
		{"replay", "--weights-profile", "nope", trace},
		{"replay", "--sweep", "w3=1:0:0.1", trace},
		{"replay", "--cycle", "soon", trace},
		{"replay", "--per-event", "--cycle", "30s", trace},
		{"replay", "--policy", "easy++:foo", trace},
		{"replay", "--policy", "sjbf:reqtime", trace},
		{"replay", "--corrector", "bad", trace},
		{"replay", "--predictor", "xyz", trace},
		{"replay", "--running-ends", "sometimes", trace},
		{"replay", "--starvation-wait", "3d", trace},
		{"replay", "--starvation-factor", "0.5", trace},
		{"replay", "--starvation-factor", "x", trace},
		{"replay", "--job-starvation-factor", "0.9", trace},
		{"replay", "--job-starvation-factor", "inf", trace},
		{"replay", "--fair-share", "equal", trace},
		{"replay", "--user-guard", "0", trace},
		{"replay", "--user-guard", "soon", trace},
	} {
		if _, _, err := runReplayCmd(t, args...); ExitCode(err) != ExitUsage {
			t.Errorf("%v: error %v (exit %d), want exit %d", args, err, ExitCode(err), ExitUsage)
		}
	}
}

func TestReplaySweep(t *testing.T) {
	out, stderr, err := runReplayCmd(t, "-o", "json", "replay", "--sweep", "reservation-depth=1,all", "--policy", "easy", tinySWF(t, ""))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep struct {
		Settings []struct {
			Setting string  `json:"setting"`
			BSLD    float64 `json:"avg_bounded_slowdown"`
		} `json:"settings"`
		Baselines []struct {
			Policy string `json:"policy"`
		} `json:"baselines"`
		Best *string `json:"best"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Settings) != 2 || rep.Settings[1].Setting != "reservation-depth=all" || len(rep.Baselines) != 1 || rep.Baselines[0].Policy != "easy" {
		t.Errorf("sweep report %+v", rep)
	}
}

func TestReplayYAML(t *testing.T) {
	out, stderr, err := runReplayCmd(t, "-o", "yaml", "replay", "--policy", "easy", tinySWF(t, ""))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "policy: easy\njobs: 4\ncapacity: 4\n") {
		t.Errorf("yaml:\n%s", out)
	}
}

// TestReplayPredictionBaselines: sjbf and both easy++ correctors side by side
// in one run, with the prediction metrics and the per-user table.
func TestReplayPredictionBaselines(t *testing.T) {
	trace := tinySWF(t, "")
	out, stderr, err := runReplayCmd(t, "replay", "--policy", "lattice,easy,sjbf,easy++,easy++:reqtime", trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"EASY++:REQTIME", "SJBF", "p99 wait (s)", "max wait (s)", "jain fairness", "prediction accuracy", "underpredicted", "USER (JOBS): AVG BSLD", "1 (2)", "2 (2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	out, stderr, err = runReplayCmd(t, "-o", "json", "replay", "--policy", "easy++:reqtime,easy", trace)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got[0]["policy"] != "easy++:reqtime" || got[0]["prediction"] == nil || got[1]["prediction"] != nil {
		t.Errorf("policies %v / %v, prediction %v / %v", got[0]["policy"], got[1]["policy"], got[0]["prediction"], got[1]["prediction"])
	}
}
