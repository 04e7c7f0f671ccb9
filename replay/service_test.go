package replay

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A service load becomes one job per interval in which the series asks for
// at least k instances; the metrics leave those jobs out but say what they
// ran; a service that takes half the machine makes the batch jobs wait.
func TestServiceLoad(t *testing.T) {
	pts, err := ReadServiceLoad(strings.NewReader("# t count\n0 1\n100 3\n200 1\n300 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadServiceLoad(strings.NewReader("10 1\n5 2\n")); err == nil || !strings.Contains(err.Error(), "time goes back") {
		t.Errorf("a series going back in time: %v", err)
	}
	var jobs []Job
	for i := range 8 {
		jobs = append(jobs, Job{ID: uint64(i + 1), Submit: time.Duration(i*40) * time.Second, Runtime: 100 * time.Second, Estimate: 200 * time.Second, Size: 2, Tenant: "a"})
	}
	tr := &Trace{Name: "t", Capacity: 4, Jobs: jobs}
	with, err := tr.WithServiceLoad(pts, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	// k=1: [0,300); k=2 and k=3: [100,200).
	var svc []string
	for _, j := range with.Jobs {
		if j.Service {
			svc = append(svc, (j.Submit.String() + "+" + j.Runtime.String()))
		}
	}
	if got := strings.Join(svc, " "); got != "0s+5m0s 1m40s+1m40s 1m40s+1m40s" {
		t.Fatalf("instance runs %q", got)
	}
	if _, err := tr.WithServiceLoad([]ServicePoint{{0, 5}}, "", 0); err == nil {
		t.Error("a load larger than the machine was accepted")
	}
	plain, err := Run(tr, Config{Policy: PolicyLattice})
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := Run(with, Config{Policy: PolicyLattice})
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Jobs != plain.Jobs || math.Abs(loaded.ServiceNodeHours-500.0/3600) > 1e-9 || plain.ServiceNodeHours != 0 {
		t.Fatalf("jobs %d/%d, service node-hours %v/%v", loaded.Jobs, plain.Jobs, loaded.ServiceNodeHours, plain.ServiceNodeHours)
	}
	if loaded.AvgWait <= plain.AvgWait {
		t.Errorf("the service cost the batch queue nothing: avg wait %v with, %v without", loaded.AvgWait, plain.AvgWait)
	}
}
