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
