package scale

import (
	"strings"
	"testing"
)

func TestThroughputReportPerJob(t *testing.T) {
	r := &ThroughputReport{Mode: "phased", Jobs: 2000, Completed: 1990, Failed: 10, MembersCPUs: 4, AgentsCPUs: 3.6,
		JobsCPUs: 11, CLICPUs: 0, HarnessCPUs: 0.4, TotalSec: 10}
	want := "CPU per job: members 2.0 ms, agents 1.8 ms, job with its supervisor 5.5 ms, latticectl 0.0 ms, harness 0.2 ms; total 9.5 ms"
	if s := r.String(); !strings.Contains(s, want) || !strings.HasPrefix(s, "lattice throughput: ") {
		t.Errorf("report:\n%s\nwant a line %q", s, want)
	}
	if s := (&ThroughputReport{Mode: "phased"}).String(); strings.Contains(s, "per job") {
		t.Errorf("no job ended, yet: %s", s)
	}
}

// The report counts the Raft commands the leader applied during the run,
// per job and by type, from lattice_quorum_commands_applied_total.
func TestThroughputReportCommands(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(`lattice_quorum_commands_applied_total{command="submit"} 10
lattice_quorum_commands_applied_total{command="assign_batch"} 4
lattice_allocations{state="COMPLETED",vcluster="hpc-batch"} 3
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseMetrics(strings.NewReader(`lattice_quorum_commands_applied_total{command="submit"} 2010
lattice_quorum_commands_applied_total{command="assign_batch"} 904
lattice_quorum_commands_applied_total{command="update_allocs"} 700
lattice_quorum_commands_applied_total{command="set_node_state"} 0
lattice_allocations{state="COMPLETED",vcluster="hpc-batch"} 2003
`))
	if err != nil {
		t.Fatal(err)
	}
	got := commandsApplied(before, after)
	if len(got) != 3 || got["submit"] != 2000 || got["assign_batch"] != 900 || got["update_allocs"] != 700 {
		t.Fatalf("commandsApplied = %v, want submit 2000, assign_batch 900, update_allocs 700", got)
	}
	r := &ThroughputReport{Mode: "concurrent", Completed: 2000, Commands: got}
	want := "Raft commands per job: 1.80 (assign_batch 0.45, submit 1.00, update_allocs 0.35)"
	if s := r.String(); !strings.Contains(s, want) {
		t.Errorf("report:\n%s\nwant a line %q", s, want)
	}
}
