package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// historyFake is the fake server with a day of ended work: a walltime
// overrun (TO), a failure, a cancellation, one that ended yesterday, and
// work of another user.
func historyFake(t *testing.T) *fakeServer {
	t.Helper()
	f := newFakeServer(t)
	req := func(name, user string, nodes int32) *latticev1.AllocationRequest {
		return &latticev1.AllocationRequest{Name: name, Tenant: "alice", User: user, Vcluster: "hpc-batch", NodesMin: nodes, NodesMax: nodes,
			WalltimeSeconds: 600, PriorityClass: 3, Command: []string{"true"}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allocs[0].Request.User = "alice"
	f.allocs = append(f.allocs,
		&latticev1.Allocation{Id: 20, DisplayId: "20", Request: req("overrun", "alice", 2), State: "FAILED", Reason: "WalltimeExceeded",
			Nodes: []string{"n004", "n005"}, HasExitCode: true, ExitCode: 143,
			SubmitTimeUnixMs: ms(-3 * time.Hour), StartTimeUnixMs: ms(-3 * time.Hour), EndTimeUnixMs: ms(-3*time.Hour + 10*time.Minute)},
		&latticev1.Allocation{Id: 21, DisplayId: "21", Request: req("broken", "bob", 1), State: "FAILED", Reason: "NonZeroExit",
			Nodes: []string{"n006"}, HasExitCode: true, ExitCode: 3,
			SubmitTimeUnixMs: ms(-time.Hour), StartTimeUnixMs: ms(-50 * time.Minute), EndTimeUnixMs: ms(-49 * time.Minute)},
		&latticev1.Allocation{Id: 22, DisplayId: "22", Request: req("never-ran", "alice", 4), State: "CANCELLED", Reason: "Cancelled",
			SubmitTimeUnixMs: ms(-30 * time.Minute), EndTimeUnixMs: ms(-20 * time.Minute)},
		&latticev1.Allocation{Id: 9, DisplayId: "9", Request: req("yesterday", "alice", 1), State: "COMPLETED",
			Nodes: []string{"n001"}, HasExitCode: true,
			SubmitTimeUnixMs: ms(-20 * time.Hour), StartTimeUnixMs: ms(-20 * time.Hour), EndTimeUnixMs: ms(-19 * time.Hour)},
	)
	return f
}

func TestHistory(t *testing.T) {
	f := historyFake(t)
	env := servers(f.addr)
	for _, format := range []string{"table", "json", "wide"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, env, "history", "-o", format)
			mustCode(t, r, 0)
			golden(t, "history."+format, r.stdout)
		})
	}
	ids := func(args ...string) string {
		t.Helper()
		r := run(t, env, append([]string{"history", "-o", "json"}, args...)...)
		mustCode(t, r, 0)
		var got []struct {
			DisplayID      string `json:"display_id"`
			User           string `json:"user"`
			ElapsedSeconds int64  `json:"elapsed_seconds"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		var out []string
		for _, g := range got {
			out = append(out, g.DisplayID)
		}
		return strings.Join(out, ",")
	}
	tests := []struct {
		args []string
		want string
	}{
		{nil, "14_0,20,21,22"}, // since midnight (t0 is noon): not 9, nor the running 12 and pending 13
		{[]string{"--state", "TO"}, "20"},
		{[]string{"-s", "timeout"}, "20"},
		{[]string{"--state", "F"}, "20,21"},
		{[]string{"--state", "CA,CD"}, "14_0,22"},
		{[]string{"-u", "bob"}, "21"},
		{[]string{"-S", "now-1hour"}, "21,22"},
		{[]string{"--starttime", "2026-02-28"}, "9,14_0,20,21,22"},
		{[]string{"--starttime", "02/28", "--endtime", "02/28-23:59"}, "9"},
		{[]string{"--state", "R,PD", "-S", "now-1days"}, "12,13"},
		{[]string{"--name", "overrun,broken"}, "20,21"},
		{[]string{"20"}, "20"},
	}
	for _, tt := range tests {
		if got := ids(tt.args...); got != tt.want {
			t.Errorf("history %s = %s, want %s", strings.Join(tt.args, " "), got, tt.want)
		}
	}
	// Elapsed is the run only: end − start, none for one that never ran.
	r := run(t, env, "history", "-o", "json", "--state", "TO,CA")
	var rows []historyView
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ElapsedSeconds != 600 || rows[1].ElapsedSeconds != 0 {
		t.Errorf("elapsed %+v", rows)
	}
	for _, bad := range [][]string{{"--state", "XX"}, {"--starttime", "yesterday-ish"}, {"-S", "now", "-E", "midnight"}, {"--format", "%i %Y"}} {
		r := run(t, env, append([]string{"history"}, bad...)...)
		mustCode(t, r, ExitUsage)
		if !strings.Contains(r.stderr, "allowed") {
			t.Errorf("history %v: %q names no allowed values", bad, r.stderr)
		}
	}
}

func TestStatusViews(t *testing.T) {
	f := historyFake(t)
	env := servers(f.addr)
	cases := []struct {
		args   []string
		golden string
	}{
		{[]string{"status", "--start"}, "status_start.table"},
		{[]string{"status", "--start", "-o", "json"}, "status_start.json"},
		{[]string{"status", "--format", "%.4i %-10j %u %t %M %D %R"}, "status_format_letters.table"},
		{[]string{"status", "--format", "id,name,user,state,elapsed,exitcode,reason"}, "status_format_names.table"},
		{[]string{"status", "--no-header", "-t", "R,PD"}, "status_noheader.table"},
		{[]string{"status", "--parsable", "-u", "alice"}, "status_parsable.table"},
		{[]string{"status", "--parsable", "--no-header", "--format", "id,st"}, "status_parsable_noheader.table"},
		{[]string{"explain"}, "explain_all.table"},
		{[]string{"explain", "-o", "json"}, "explain_all.json"},
		{[]string{"nodes", "--summary"}, "nodes_summary.table"},
		{[]string{"nodes", "--summary", "-o", "json"}, "nodes_summary.json"},
		{[]string{"nodes", "--parsable"}, "nodes_parsable.table"},
		{[]string{"vcluster", "list", "--no-header"}, "vcluster_list_noheader.table"},
		{[]string{"usage", "--parsable"}, "usage_parsable.table"},
		{[]string{"vcluster", "list", "-o", "json"}, "vcluster_list.json"},
		{[]string{"tenant", "list"}, "tenant_list.table"},
		{[]string{"tenant", "list", "-o", "json"}, "tenant_list.json"},
		{[]string{"history", "--parsable", "--no-header", "-S", "now-1days", "--format", "JobID,State,Elapsed,ExitCode"}, "history_parsable.table"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := run(t, env, c.args...)
			mustCode(t, r, 0)
			golden(t, c.golden, r.stdout)
		})
	}
	t.Run("TO filters walltime overruns", func(t *testing.T) {
		r := run(t, env, "status", "-t", "TO", "--format", "%i")
		mustCode(t, r, 0)
		if r.stdout != "ID\n20\n" {
			t.Errorf("stdout %q", r.stdout)
		}
		r = run(t, env, "status", "-t", "CG")
		mustCode(t, r, 0)
		if r.stdout != "ID  NAME  TENANT  VCLUSTER  STATE  TIME  NODES  NODELIST(REASON)\n" {
			t.Errorf("CG matches nothing in Lattice, got %q", r.stdout)
		}
	})
	t.Run("bad format names the allowed fields", func(t *testing.T) {
		r := run(t, env, "status", "--format", "id,nmae")
		mustCode(t, r, ExitUsage)
		if !strings.Contains(r.stderr, "did you mean name?") {
			t.Errorf("stderr %q", r.stderr)
		}
	})
}

func TestSlurmTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
	tests := map[string]string{
		"now":                       "2026-03-01T12:30:00Z",
		"midnight":                  "2026-03-01T00:00:00Z",
		"today":                     "2026-03-01T00:00:00Z",
		"noon":                      "2026-03-01T12:00:00Z",
		"tomorrow":                  "2026-03-02T00:00:00Z",
		"now+1hour":                 "2026-03-01T13:30:00Z",
		"now-2days":                 "2026-02-27T12:30:00Z",
		"now+90":                    "2026-03-01T12:31:30Z",
		"08:15":                     "2026-03-01T08:15:00Z",
		"2026-02-14":                "2026-02-14T00:00:00Z",
		"2026-02-14T09:30:05":       "2026-02-14T09:30:05Z",
		"0214":                      "2026-02-14T00:00:00Z",
		"021425":                    "2025-02-14T00:00:00Z",
		"02/14-10:00":               "2026-02-14T10:00:00Z",
		"02.14.25":                  "2025-02-14T00:00:00Z",
		"2026-02-14T09:30:05+01:00": "2026-02-14T08:30:05Z",
	}
	for in, want := range tests {
		got, err := parseSlurmTime("starttime", in, now, time.UTC)
		if err != nil || got.UTC().Format(time.RFC3339) != want {
			t.Errorf("parseSlurmTime(%q) = %v, %v; want %s", in, got.UTC(), err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "now+1fortnight", "25:00", "2026-02-30", "13/01", "now+999999999999weeks"} {
		if _, err := parseSlurmTime("starttime", bad, now, time.UTC); err == nil {
			t.Errorf("parseSlurmTime(%q) accepted", bad)
		}
	}
}

// logs without --stdout/--stderr prints both streams, each on its own, also
// when following; with one file for both (-o without -e) it reads it once.
func TestLogsBothStreams(t *testing.T) {
	f := newFakeServer(t)
	env := servers(f.addr)
	r := run(t, env, "logs", "12", "-f")
	mustCode(t, r, 0)
	if r.stdout != "hello\nworld\n" || r.stderr != "to stderr\n" {
		t.Errorf("logs -f: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	f.mu.Lock()
	f.allocs[0].Request.Stdout = "slurm-%j.out" // stderr goes with it
	n := len(f.logsReqs)
	f.mu.Unlock()
	r = run(t, env, "logs", "12")
	mustCode(t, r, 0)
	f.mu.Lock()
	reqs := f.logsReqs[n:]
	f.mu.Unlock()
	if r.stdout != "hello\nworld\n" || r.stderr != "" || len(reqs) != 1 || reqs[0].GetStderr() {
		t.Errorf("one file: stdout %q, stderr %q, requests %v", r.stdout, r.stderr, reqs)
	}
	r = run(t, env, "logs", "12", "--stdout", "--stderr")
	mustCode(t, r, ExitUsage)
}

// Elapsed time is the run only: end − start once ended, now − start while
// running, nothing while pending (a requeued allocation's old start does not
// count), and never negative.
func TestRunDuration(t *testing.T) {
	r := &runner{Env: Env{Now: func() time.Time { return t0 }}}
	tests := []struct {
		name string
		a    *latticev1.Allocation
		want time.Duration
	}{
		{"running", &latticev1.Allocation{State: "RUNNING", StartTimeUnixMs: ms(-90 * time.Second)}, 90 * time.Second},
		{"ended", &latticev1.Allocation{State: "COMPLETED", StartTimeUnixMs: ms(-time.Hour), EndTimeUnixMs: ms(-59 * time.Minute)}, time.Minute},
		{"never started", &latticev1.Allocation{State: "CANCELLED", EndTimeUnixMs: ms(-time.Minute)}, 0},
		{"pending again after a requeue", &latticev1.Allocation{State: "PENDING", StartTimeUnixMs: ms(-time.Hour)}, 0},
		{"end before start (clock skew)", &latticev1.Allocation{State: "FAILED", StartTimeUnixMs: ms(0), EndTimeUnixMs: ms(-time.Second)}, 0},
	}
	for _, tt := range tests {
		if got := r.runDuration(tt.a); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
