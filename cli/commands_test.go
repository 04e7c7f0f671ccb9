package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
)

func TestExitCodeMapping(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"field error", &model.FieldError{Field: "nodes", Value: "0", Allowed: "N >= 1"}, 2},
		{"wrapped field error", fmt.Errorf("job.sh:3: %w", &model.FieldError{Field: "walltime"}), 2},
		{"usage", usageErrorf("usage"), 2},
		{"not found", notFoundf("node x not found"), 3},
		{"InvalidArgument", status.Error(codes.InvalidArgument, "bad"), 2},
		{"NotFound", status.Error(codes.NotFound, "gone"), 3},
		{"Unavailable", status.Error(codes.Unavailable, "no leader"), 75},
		{"DeadlineExceeded", status.Error(codes.DeadlineExceeded, "slow"), 75},
		{"FailedPrecondition", status.Error(codes.FailedPrecondition, "stale"), 1},
		{"ResourceExhausted", status.Error(codes.ResourceExhausted, "quota"), 1},
		{"PermissionDenied", status.Error(codes.PermissionDenied, "no"), 1},
		{"Internal", status.Error(codes.Internal, "boom"), 1},
		{"api error wrapped", fmt.Errorf("looking up 12_3: %w", fromRPC(status.Error(codes.NotFound, "gone"))), 3},
		{"plain", errors.New("disk full"), 1},
		{"explicit", &exitError{code: 75, err: errors.New("x")}, 75},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	if msg := fromRPC(status.Error(codes.NotFound, "allocation 9 not found")).Error(); msg != "allocation 9 not found" {
		t.Errorf("server messages are shown without the gRPC wrapping, got %q", msg)
	}
}

func TestServerErrorsMapToExitCodes(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "show", "99")
	mustCode(t, r, ExitNotFound)
	if r.stderr != "latticectl: allocation 99 not found\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	mustCode(t, run(t, env, "show", "x9"), ExitUsage)
	mustCode(t, run(t, env, "show"), ExitUsage)
	mustCode(t, run(t, env, "explain", "12"), ExitNotFound)
	mustCode(t, run(t, env, "nodes", "show", "nope"), ExitNotFound)
	mustCode(t, run(t, env, "vcluster", "show", "nope"), ExitNotFound)
	mustCode(t, run(t, env, "frob"), ExitUsage)
	mustCode(t, run(t, env, "nodes", "frob"), ExitUsage)
	mustCode(t, run(t, env, "quorum", "frob"), ExitUsage)
	mustCode(t, run(t, env, "status", "-o", "xml"), ExitUsage)
	mustCode(t, run(t, env, "status", "--state", "WAITING"), ExitUsage)
}

func TestRetryAcrossServers(t *testing.T) {
	t.Run("first address down, second answers", func(t *testing.T) {
		f := newFakeServer(t)
		r := run(t, servers(deadAddr(t), f.addr), "status", "-o", "json")
		mustCode(t, r, 0)
		if calls, _, _ := f.snapshot(); !reflect.DeepEqual(calls, []string{"List"}) {
			t.Errorf("calls %v", calls)
		}
	})
	t.Run("a member without leader answers Unavailable, the next one commits; same request id", func(t *testing.T) {
		f1, f2 := newFakeServer(t), newFakeServer(t)
		f1.unavailable = 1
		r := run(t, servers(f1.addr, f2.addr), "submit", "--parsable", "--", "true")
		mustCode(t, r, 0)
		if r.stdout != "40\n" {
			t.Errorf("stdout %q", r.stdout)
		}
		_, ids1, _ := f1.snapshot()
		_, ids2, _ := f2.snapshot()
		if len(ids1) != 1 || len(ids2) != 1 || ids1[0] == "" || ids1[0] != ids2[0] {
			t.Errorf("client request ids %q then %q: want one non-empty id reused", ids1, ids2)
		}
	})
	t.Run("one server, no leader for a moment: retried with the same request id", func(t *testing.T) {
		f := newFakeServer(t)
		f.unavailable = 2
		r := run(t, map[string]string{"LATTICE_SERVER": f.addr, "LATTICE_RETRY_BUDGET": "5s"}, "cancel", "12")
		mustCode(t, r, 0)
		_, ids, _ := f.snapshot()
		if len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] || ids[0] == "" {
			t.Errorf("request ids %q", ids)
		}
	})
	t.Run("every invocation has its own request id", func(t *testing.T) {
		f := newFakeServer(t)
		mustCode(t, run(t, servers(f.addr), "submit", "--", "true"), 0)
		mustCode(t, run(t, servers(f.addr), "submit", "--", "true"), 0)
		_, ids, _ := f.snapshot()
		if len(ids) != 2 || ids[0] == ids[1] {
			t.Errorf("request ids %q", ids)
		}
	})
	t.Run("nothing answers: exit 75", func(t *testing.T) {
		a, b := deadAddr(t), deadAddr(t)
		r := run(t, servers(a, b), "status")
		mustCode(t, r, ExitUnavailable)
		if !strings.Contains(r.stderr, "no Lattice server answered (tried "+a+", "+b) || !strings.Contains(r.stderr, "retry later") {
			t.Errorf("stderr %q", r.stderr)
		}
	})
	t.Run("every server says no leader: exit 75", func(t *testing.T) {
		f := newFakeServer(t)
		f.unavailable = 1000
		r := run(t, servers(f.addr), "submit", "--", "true")
		mustCode(t, r, ExitUnavailable)
	})
	t.Run("--server flag wins over LATTICE_SERVER", func(t *testing.T) {
		f := newFakeServer(t)
		mustCode(t, run(t, servers(deadAddr(t)), "status", "--server", f.addr), 0)
		mustCode(t, run(t, servers(deadAddr(t)), "--server", f.addr, "status"), 0)
	})
	t.Run("a non-retryable error is not retried elsewhere", func(t *testing.T) {
		f1, f2 := newFakeServer(t), newFakeServer(t)
		mustCode(t, run(t, servers(f1.addr, f2.addr), "show", "99"), ExitNotFound)
		if calls, _, _ := f2.snapshot(); len(calls) != 0 {
			t.Errorf("second server called: %v", calls)
		}
	})
}

func TestTokenIsSentAsBearer(t *testing.T) {
	f := newFakeServer(t)
	mustCode(t, run(t, servers(f.addr), "status", "--token", "s3cret"), 0)
	env := servers(f.addr)
	env["LATTICE_TOKEN"] = "fromenv"
	mustCode(t, run(t, env, "logs", "12", "--stdout"), 0)
	mustCode(t, run(t, servers(f.addr), "status"), 0)
	if _, _, auth := f.snapshot(); !reflect.DeepEqual(auth, []string{"Bearer s3cret", "Bearer fromenv"}) {
		t.Errorf("authorization %q", auth)
	}
}

func TestSubmitSendsTheRequest(t *testing.T) {
	f := newFakeServer(t)
	script := writeScript(t, "#!/bin/sh\n#SBATCH -N 2 -J sim -a 0-3 -o sim_%A_%a.out\n./sim\n")
	r := run(t, servers(f.addr), "submit", script, "-p", "hpc-batch", "-d", "afterok:14_0")
	mustCode(t, r, 0)
	if r.stdout != "40\n" || !strings.Contains(r.stderr, "submitted array 40 (4 tasks 40_0…40_3)") {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if len(f.submits) != 1 {
		t.Fatalf("submits: %d", len(f.submits))
	}
	req := f.submits[0].GetRequest()
	if req.GetName() != "sim" || req.GetNodesMin() != 2 || req.GetVcluster() != "hpc-batch" || req.GetTenant() != "" ||
		req.GetArray().GetEnd() != 3 || req.GetStdout() != "sim_%A_%a.out" || req.GetWorkDir() != "/home/alice/proj" ||
		!strings.HasPrefix(req.GetScript(), "#!/bin/sh\n") || req.GetHotDataFraction() != -1 || req.GetPriorityClass() != 5 ||
		req.GetWalltimeSeconds() != 3600 || len(req.GetCommand()) != 0 {
		t.Errorf("request %v", req)
	}
	// 14_0 was resolved to allocation 14 through Get, and marked as one
	// task (14 alone would mean the whole array).
	if deps := req.GetDependsOn(); len(deps) != 1 || deps[0].GetCondition() != "afterok" || !reflect.DeepEqual(deps[0].GetIds(), []uint64{14}) ||
		!deps[0].GetTask() || req.GetDependencyAny() {
		t.Errorf("depends_on %v", deps)
	}
	if f.submits[0].GetClientRequestId() == "" {
		t.Error("no client request id")
	}

	r = run(t, servers(f.addr), "submit", "-o", "json", "--", "sh", "-c", "echo hello-$LATTICE_ALLOC_ID")
	mustCode(t, r, 0)
	var v submitView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.ID != 44 || v.DisplayID != "44" || !reflect.DeepEqual(v.IDs, []uint64{44}) {
		t.Errorf("submit -o json: %s (%v)", r.stdout, err)
	}
	if got := f.submits[1].GetRequest().GetCommand(); !reflect.DeepEqual(got, []string{"sh", "-c", "echo hello-$LATTICE_ALLOC_ID"}) {
		t.Errorf("command %q", got)
	}
	r = run(t, servers(f.addr), "submit", "-J", "post", "--dependency", "afterok:14?afternotok:12,singleton", "--", "true")
	mustCode(t, r, ExitUsage)
	if !strings.Contains(r.stderr, "not both") {
		t.Errorf("mixed separators: %q", r.stderr)
	}
	r = run(t, servers(f.addr), "submit", "-J", "post", "--dependency", "afterok:14?afternotok:12", "--", "true")
	mustCode(t, r, 0)
	if req := f.submits[len(f.submits)-1].GetRequest(); !req.GetDependencyAny() || len(req.GetDependsOn()) != 2 || req.GetDependsOn()[0].GetTask() {
		t.Errorf("any-of request %v", req)
	}
	r = run(t, servers(f.addr), "submit", "-d", "afterok:77_1", "--", "true")
	mustCode(t, r, ExitNotFound)
	if !strings.Contains(r.stderr, "looking up 77_1: allocation 77_1 not found") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestStatusFormats(t *testing.T) {
	f := newFakeServer(t)
	for _, format := range []string{"table", "wide", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, servers(f.addr), "status", "-o", format)
			mustCode(t, r, 0)
			golden(t, "status."+format, r.stdout)
		})
	}
}

func TestStatusFilters(t *testing.T) {
	f := newFakeServer(t)
	r := run(t, servers(f.addr), "status", "--state", "R,pd", "--vcluster", "ml-training", "--mine", "12", "13")
	mustCode(t, r, 0)
	r = run(t, servers(f.addr), "status", "-t", "CD", "--ended-within", "2h")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "14_0") || strings.Contains(r.stdout, "RUNNING") {
		t.Errorf("stdout %s", r.stdout)
	}
	_ = r
	// The fake filters like a server would; check what it was asked.
	calls, _, _ := f.snapshot()
	if len(calls) != 2 {
		t.Fatalf("calls %v", calls)
	}
}

// TestAllocationJSONShape pins the allocation object of CLI.md.
func TestAllocationJSONShape(t *testing.T) {
	f := newFakeServer(t)
	r := run(t, servers(f.addr), "status", "-o", "json")
	mustCode(t, r, 0)
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 3 {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	keys := []string{"id", "name", "tenant", "project", "vcluster", "state", "reason", "nodes", "node_count", "priority_class",
		"walltime_seconds", "submit_time", "start_time", "end_time", "exit_code", "dag_id", "array_index", "checkpoint"}
	for _, k := range keys {
		if _, ok := list[0][k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	running, pending, task := list[0], list[1], list[2]
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	check("id", running["id"], 12.0)
	check("nodes", running["nodes"], []any{"n001", "n002"})
	check("node_count", running["node_count"], 2.0)
	check("submit_time", running["submit_time"], "2026-03-01T11:00:00Z")
	check("end_time", running["end_time"], nil)
	check("exit_code", running["exit_code"], nil)
	check("dag_id", running["dag_id"], nil)
	check("array_index", running["array_index"], nil)
	check("pending nodes", pending["nodes"], []any{})
	check("pending node_count", pending["node_count"], 1.0)
	check("pending reason", pending["reason"], "Resources")
	check("start_time", pending["start_time"], nil)
	check("task id", task["id"], 14.0)
	check("task display_id", task["display_id"], "14_0")
	check("task array_index", task["array_index"], 0.0)
	check("task exit_code", task["exit_code"], 0.0)
	check("task end_time", task["end_time"], "2026-03-01T10:01:15Z")
	if _, ok := running["explanation"]; ok {
		t.Error("status does not carry explanations")
	}
}

func TestShowAndExplain(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	for _, c := range []struct{ golden, args string }{
		{"show_pending.table", "show 13"},
		{"show_running.table", "show 12"},
		{"show_pending.json", "show 13 -o json"},
		{"explain.table", "explain 13"},
		{"explain.yaml", "explain -o yaml 13"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			r := run(t, env, strings.Fields(c.args)...)
			mustCode(t, r, 0)
			golden(t, c.golden, r.stdout)
		})
	}
}

func TestCancel(t *testing.T) {
	t.Run("unknown id: the others are cancelled, exit 3", func(t *testing.T) {
		f := newFakeServer(t)
		r := run(t, servers(f.addr), "cancel", "12", "99", "13")
		mustCode(t, r, ExitNotFound)
		if len(f.cancels) != 1 || !reflect.DeepEqual(f.cancels[0].GetIds(), []string{"12", "99", "13"}) || f.cancels[0].GetClientRequestId() == "" {
			t.Fatalf("cancels %v", f.cancels)
		}
		if f.find("12").GetState() != "CANCELLED" || f.find("13").GetState() != "CANCELLED" {
			t.Error("the known ids were not cancelled")
		}
		for _, want := range []string{"cancelled 12\n", "latticectl: cancel 99: allocation 99 not found\n", "cancelled 13\n", "1 of 3 allocations not found"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q lacks %q", r.stderr, want)
			}
		}
	})
	t.Run("server refusing the whole batch: one by one", func(t *testing.T) {
		f := newFakeServer(t)
		f.cancelBatchNotFound = true
		r := run(t, servers(f.addr), "cancel", "12", "99", "13", "-o", "json")
		mustCode(t, r, ExitNotFound)
		if len(f.cancels) != 4 {
			t.Fatalf("cancel calls %d, want 1 batch + 3 single", len(f.cancels))
		}
		seen := map[string]bool{}
		for _, c := range f.cancels {
			seen[c.GetClientRequestId()] = true
		}
		if len(seen) != 4 {
			t.Errorf("each call needs its own request id: %v", seen)
		}
		var out []cancelView
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 3 || !out[0].Cancelled || out[1].Cancelled || !out[2].Cancelled {
			t.Errorf("json %s (%v)", r.stdout, err)
		}
	})
	t.Run("all known", func(t *testing.T) {
		f := newFakeServer(t)
		mustCode(t, run(t, servers(f.addr), "cancel", "12", "14_0"), 0)
	})
	t.Run("no id", func(t *testing.T) {
		mustCode(t, run(t, nil, "cancel"), ExitUsage)
	})
}

func TestLogs(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "logs", "12")
	mustCode(t, r, 0)
	if r.stdout != "hello\nworld\n" || r.stderr != "to stderr\n" {
		t.Errorf("without --stdout/--stderr both streams print, each on its own: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	r = run(t, env, "logs", "12", "--stderr", "-f")
	mustCode(t, r, 0)
	if r.stdout != "to stderr\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	last := f.logsReqs[len(f.logsReqs)-1]
	if !last.GetStderr() || !last.GetFollow() || last.GetId() != "12" {
		t.Errorf("request %v", last)
	}
	mustCode(t, run(t, env, "logs", "77"), ExitNotFound)

	t.Run("a broken stream resumes at its offset on the next server", func(t *testing.T) {
		f1, f2 := newFakeServer(t), newFakeServer(t)
		f1.logsBreakAfter = true
		r := run(t, servers(f1.addr, f2.addr), "logs", "-f", "12", "--stdout")
		mustCode(t, r, 0)
		if r.stdout != "hello\nworld\n" {
			t.Errorf("stdout %q", r.stdout)
		}
		if len(f2.logsReqs) != 1 || f2.logsReqs[0].GetOffset() != 6 {
			t.Errorf("resumed with %v", f2.logsReqs)
		}
	})
}

func TestNodes(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	for _, format := range []string{"table", "wide", "json"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, env, "nodes", "-o", format)
			mustCode(t, r, 0)
			golden(t, "nodes."+format, r.stdout)
		})
	}
	r := run(t, env, "nodes", "show", "n003")
	mustCode(t, r, 0)
	golden(t, "nodes_show.table", r.stdout)

	// Flags after the node name work (urfave/cli v2 alone would not parse them).
	r = run(t, env, "nodes", "drain", "n001", "--reason", "bad DIMM", "-o", "json")
	mustCode(t, r, 0)
	if len(f.drains) != 1 || f.drains[0].GetName() != "n001" || f.drains[0].GetReason() != "bad DIMM" {
		t.Errorf("drains %v", f.drains)
	}
	var n map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &n); err != nil || n["state"] != "Draining" {
		t.Errorf("drain output %s", r.stdout)
	}
	r = run(t, env, "nodes", "drain", "n001")
	mustCode(t, r, ExitUsage)
	if !strings.Contains(r.stderr, "invalid reason") {
		t.Errorf("stderr %q", r.stderr)
	}
	mustCode(t, run(t, env, "nodes", "undrain", "n001"), 0)
	mustCode(t, run(t, env, "nodes", "undrain", "nope"), ExitNotFound)
}

// TestNodeJSONShape pins the node object of CLI.md.
func TestNodeJSONShape(t *testing.T) {
	f := newFakeServer(t)
	r := run(t, servers(f.addr), "nodes", "-o", "json")
	mustCode(t, r, 0)
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 {
		t.Fatalf("%v %s", err, r.stdout)
	}
	for _, k := range []string{"name", "state", "home_vcluster", "current_vcluster", "group", "fingerprint", "allocation",
		"power_watts", "gpu_type", "gpus", "features"} {
		if _, ok := list[1][k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
	if list[0]["allocation"] != 12.0 || list[1]["allocation"] != nil || !reflect.DeepEqual(list[1]["features"], []any{}) {
		t.Errorf("allocation %v / %v, features %v", list[0]["allocation"], list[1]["allocation"], list[1]["features"])
	}
}

func TestVCluster(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "vcluster", "list")
	mustCode(t, r, 0)
	golden(t, "vcluster_list.table", r.stdout)
	r = run(t, env, "vcluster", "show", "hpc-batch", "-o", "yaml")
	mustCode(t, r, 0)
	golden(t, "vcluster_show.yaml", r.stdout)

	r = run(t, env, "vcluster", "set", "hpc-batch", "--weight", "f3=0.3", "--weight", "F4=0.1,f9=1", "--reservation-depth", "all",
		"--cycle", "10s", "--allow-lending", "false", "--allow-borrowing", "yes", "--power-cap-kw", "12.5", "--weights-profile", "ml-training")
	mustCode(t, r, 0)
	req := f.setVC[0]
	var ws []string
	for _, w := range req.GetWeights() {
		ws = append(ws, fmt.Sprintf("%s=%g", w.GetFactor(), w.GetValue()))
	}
	if !reflect.DeepEqual(ws, []string{"f3=0.3", "f4=0.1", "f9=1"}) || !req.GetSetReservationDepth() || req.GetReservationDepth() != -1 ||
		req.GetCycleMs() != 10000 || !req.GetSetLending() || req.GetAllowLending() || !req.GetSetBorrowing() || !req.GetAllowBorrowing() ||
		!req.GetSetPowerCap() || req.GetPowerCapWatts() != 12500 || req.GetWeightsProfile() != "ml-training" || req.GetClientRequestId() == "" {
		t.Errorf("set request %v", req)
	}
	r = run(t, env, "vcluster", "set", "hpc-batch", "--cycle", "5s")
	mustCode(t, r, 0)
	if req := f.setVC[1]; req.GetSetLending() || req.GetSetPowerCap() || req.GetSetReservationDepth() || len(req.GetWeights()) != 0 {
		t.Errorf("only --cycle was given: %v", req)
	}
	r = run(t, env, "vcluster", "set", "hpc-batch", "--fair-share", "Job-Service", "--service-protect", "on")
	mustCode(t, r, 0)
	if req := f.setVC[2]; req.GetFairShare() != "job-service" || !req.GetSetServiceProtect() || !req.GetServiceProtect() {
		t.Errorf("fair share and service protection: %v", req)
	}
	if req := f.setVC[1]; req.GetFairShare() != "" || req.GetSetServiceProtect() || req.GetRunningEnds() != "" || req.GetSetPredictedStarts() {
		t.Errorf("only --cycle was given: %v", req)
	}
	r = run(t, env, "vcluster", "set", "hpc-batch", "--running-ends", "Predicted", "--predicted-starts", "false")
	mustCode(t, r, 0)
	if req := f.setVC[3]; req.GetRunningEnds() != "predicted" || !req.GetSetPredictedStarts() || req.GetPredictedStarts() {
		t.Errorf("running ends and predicted starts: %v", req)
	}
	for _, bad := range [][]string{
		{"--weight", "f10=0.1"}, {"--weight", "f3=2"}, {"--weight", "f3"}, {"--reservation-depth", "-2"},
		{"--cycle", "fast"}, {"--allow-lending", "maybe"}, {"--power-cap-kw", "-1"}, {"--type", "gpu"}, {},
		{"--fair-share", "slowdown"}, {"--service-protect", "maybe"}, {"--running-ends", "estimate"}, {"--predicted-starts", "maybe"},
	} {
		r := run(t, env, append([]string{"vcluster", "set", "hpc-batch"}, bad...)...)
		if r.code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, r.code, r.stderr)
		}
	}
	r = run(t, env, "vcluster", "set", "hpc-batch", "--fair-share", "slowdown")
	if !strings.Contains(r.stderr, `invalid fair-share "slowdown": allowed usage, service, job-service`) {
		t.Errorf("--fair-share slowdown: stderr %q does not name the field and the allowed values", r.stderr)
	}
	r = run(t, env, "vcluster", "set", "hpc-batch", "--running-ends", "estimate")
	if !strings.Contains(r.stderr, `invalid running-ends "estimate": allowed predicted, walltime`) {
		t.Errorf("--running-ends estimate: stderr %q does not name the field and the allowed values", r.stderr)
	}
}

func TestQuorum(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "quorum", "status", "-o", "json")
	mustCode(t, r, 0)
	want := `{
  "leader_id": "m1",
  "term": 3,
  "commit_index": 120,
  "members": [
    {
      "id": "m1",
      "raft_addr": "127.0.0.1:7001",
      "api_addr": "127.0.0.1:7070",
      "role": "leader",
      "healthy": true,
      "voter": true,
      "lag": 0,
      "feature_level": 0
    },
    {
      "id": "m2",
      "raft_addr": "127.0.0.1:7002",
      "api_addr": "127.0.0.1:7071",
      "role": "unreachable",
      "healthy": false,
      "voter": true,
      "lag": 0,
      "feature_level": 0
    }
  ],
  "applied_index": 120,
  "state_version": 77
}
`
	if r.stdout != want {
		t.Errorf("quorum status json:\n%s", r.stdout)
	}
	r = run(t, env, "quorum", "status")
	mustCode(t, r, 0)
	golden(t, "quorum_status.table", r.stdout)

	mustCode(t, run(t, env, "quorum", "add", "m3", "127.0.0.1:7003", "--api-addr", "127.0.0.1:7072"), 0)
	if len(f.joins) != 1 || f.joins[0].GetId() != "m3" || f.joins[0].GetRaftAddr() != "127.0.0.1:7003" || f.joins[0].GetApiAddr() != "127.0.0.1:7072" {
		t.Errorf("joins %v", f.joins)
	}
	mustCode(t, run(t, env, "quorum", "add", "m3"), ExitUsage)
	r = run(t, env, "quorum", "transfer")
	mustCode(t, r, 0)
	if r.stdout != "m2\n" {
		t.Errorf("transfer %q", r.stdout)
	}
	if r = run(t, env, "quorum", "transfer", "m2", "-o", "json"); r.stdout != "{\n  \"new_leader_id\": \"m2\"\n}\n" {
		t.Errorf("transfer -o json %q", r.stdout)
	}

	path := filepath.Join(t.TempDir(), "lattice.backup")
	mustCode(t, run(t, env, "quorum", "backup", path), 0)
	if got, _ := os.ReadFile(path); string(got) != string(f.backup) {
		t.Errorf("backup file has %d bytes, want %d", len(got), len(f.backup))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*partial*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// Without the hooks (latticectl), verify runs in latticectl-offline.
	r = run(t, map[string]string{"LATTICECTL_OFFLINE": filepath.Join(t.TempDir(), "none")}, "quorum", "verify", path)
	mustCode(t, r, ExitError)
	if !strings.Contains(r.stderr, "latticectl quorum verify runs in latticectl-offline") {
		t.Errorf("stderr %q", r.stderr)
	}
	var verified, restored string
	VerifyBackup = func(p string) error { verified = p; return nil }
	RestoreBackup = func(p, dir string) error { restored = p + " → " + dir; return nil }
	t.Cleanup(func() { VerifyBackup, RestoreBackup = nil, nil })
	mustCode(t, run(t, env, "quorum", "verify", path), 0)
	mustCode(t, run(t, env, "quorum", "restore", path), ExitUsage)
	mustCode(t, run(t, map[string]string{"LATTICE_DATA_DIR": "/var/lib/lattice"}, "quorum", "restore", path), 0)
	if verified != path || restored != path+" → /var/lib/lattice" {
		t.Errorf("hooks: %q %q", verified, restored)
	}
	VerifyBackup = func(string) error { return errors.New("checksum mismatch in record 7") }
	r = run(t, env, "quorum", "verify", path)
	mustCode(t, r, ExitError)
	if r.stderr != "latticectl: checksum mismatch in record 7\n" {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestPowerAndUsage(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "power")
	mustCode(t, r, 0)
	golden(t, "power.table", r.stdout)
	mustCode(t, run(t, env, "power", "set", "--budget-kw", "250", "--vcluster", "hpc-batch"), 0)
	if p := f.setPower[0]; p.GetBudgetWatts() != 250000 || p.GetVcluster() != "hpc-batch" || p.GetClientRequestId() == "" {
		t.Errorf("set power %v", p)
	}
	mustCode(t, run(t, env, "power", "set"), ExitUsage)
	mustCode(t, run(t, env, "power", "set", "--budget-kw", "lots"), ExitUsage)

	r = run(t, env, "usage")
	mustCode(t, r, 0)
	golden(t, "usage.table", r.stdout)
	r = run(t, env, "usage", "--tenant", "bob", "-o", "json")
	mustCode(t, r, 0)
	var ts []tenantView
	if err := json.Unmarshal([]byte(r.stdout), &ts); err != nil || len(ts) != 1 || ts[0].Name != "bob" {
		t.Errorf("usage --tenant bob: %s", r.stdout)
	}
	mustCode(t, run(t, env, "usage", "--tenant", "carol"), ExitNotFound)

	// Flags not given keep the tenant's current values.
	mustCode(t, run(t, env, "tenant", "set", "alice", "--max-running", "5"), 0)
	if s := f.setTenant[0]; s.GetMaxRunning() != 5 || s.GetMaxNodes() != 10 || s.GetFairShareTarget() != 0.25 {
		t.Errorf("set tenant %v", s)
	}
	mustCode(t, run(t, env, "tenant", "set", "alice", "--fair-share", "1.5"), ExitUsage)
	mustCode(t, run(t, env, "tenant", "set", "alice"), ExitUsage)
}

func TestCompletionAndHelp(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := run(t, nil, "completion", sh)
		mustCode(t, r, 0)
		if !strings.Contains(r.stdout, "latticectl") {
			t.Errorf("%s: %s", sh, r.stdout)
		}
	}
	if r := run(t, nil, "completion", "fish"); !strings.Contains(r.stdout, "complete -c latticectl") || !strings.Contains(r.stdout, "submit") {
		t.Errorf("fish: %s", r.stdout)
	}
	mustCode(t, run(t, nil, "completion", "tcsh"), ExitUsage)
	r := run(t, nil, "submit", "--generate-bash-completion")
	mustCode(t, r, 0)
	// urfave/cli reads the word being completed from os.Args.
	args := os.Args
	os.Args = []string{"latticectl", "--generate-bash-completion"}
	r = run(t, nil, "--generate-bash-completion")
	os.Args = args
	mustCode(t, r, 0)
	for _, cmd := range []string{"submit", "status", "show", "explain", "cancel", "logs", "nodes", "vcluster", "quorum", "power", "usage", "replay", "completion"} {
		if !strings.Contains(r.stdout, cmd+"\n") {
			t.Errorf("completion lacks %s", cmd)
		}
	}
	r = run(t, nil, "--help")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "submit") {
		t.Errorf("help: %s", r.stdout)
	}
	r = run(t, nil, "submit", "--help")
	mustCode(t, r, 0)
	if !strings.Contains(r.stdout, "--dry-run") || !strings.Contains(r.stdout, "--partition") {
		t.Errorf("submit help: %s", r.stdout)
	}
}

func TestHostlist(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"n001", "n002", "n003", "n007"}, "n[001-003,007]"},
		{[]string{"n1"}, "n1"},
		{[]string{"gpu-10", "gpu-9", "gpu-11", "cpu-1"}, "gpu-[9-11],cpu-1"},
		{[]string{"login", "n01", "n02"}, "n[01-02],login"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := hostlist(tt.in); got != tt.want {
			t.Errorf("hostlist(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReorder(t *testing.T) {
	r := &runner{}
	app := r.app()
	tests := []struct {
		in, want  []string
		afterDash int
	}{
		{[]string{"nodes", "drain", "n1", "--reason", "x"}, []string{"nodes", "drain", "--reason", "x", "--", "n1"}, 0},
		{[]string{"-o", "json", "status", "12", "--mine"}, []string{"-o", "json", "status", "--mine", "--", "12"}, 0},
		{[]string{"submit", "job.sh", "-N", "2"}, []string{"submit", "-N", "2", "--", "job.sh"}, 0},
		{[]string{"submit", "-N", "2", "--", "sh", "-c", "x"}, []string{"submit", "-N", "2", "--", "sh", "-c", "x"}, 3},
		{[]string{"logs", "12", "-f"}, []string{"logs", "-f", "--", "12"}, 0},
		{[]string{"status", "--state=R", "12"}, []string{"status", "--state=R", "--", "12"}, 0},
	}
	for _, tt := range tests {
		r.afterDash, r.sawDash = 0, false
		if got := r.reorder(app.Flags, app.Commands, tt.in); !reflect.DeepEqual(got, tt.want) || r.afterDash != tt.afterDash {
			t.Errorf("reorder(%q) = %q (after -- %d), want %q (%d)", tt.in, got, r.afterDash, tt.want, tt.afterDash)
		}
	}
}
