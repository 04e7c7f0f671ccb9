package cli

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// The fake server's job-control and site-configuration answers. What they
// received is kept beside the fake (not in it, so fake_test.go stays as it is).

type jobControlRecord struct {
	controls []*latticev1.JobControlRequest
	signals  []*latticev1.SignalRequest
	updates  []*latticev1.UpdateAllocationRequest
}

var (
	jcMu      sync.Mutex
	jcRecords = map[*fakeServer]*jobControlRecord{}
)

func (f *fakeServer) jc() *jobControlRecord {
	jcMu.Lock()
	defer jcMu.Unlock()
	r := jcRecords[f]
	if r == nil {
		r = &jobControlRecord{}
		jcRecords[f] = r
	}
	return r
}

func (f *fakeServer) answer(ids []string) *latticev1.JobControlResponse {
	resp := &latticev1.JobControlResponse{}
	for _, id := range ids {
		if id == "999" {
			resp.Results = append(resp.Results, &latticev1.JobControlResult{Id: id, Error: "allocation 999 not found"})
		} else {
			resp.Results = append(resp.Results, &latticev1.JobControlResult{Id: id, Ok: true})
		}
	}
	return resp
}

func (f *fakeServer) control(req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	r := f.jc()
	jcMu.Lock()
	r.controls = append(r.controls, req)
	jcMu.Unlock()
	return f.answer(req.GetIds()), nil
}

func (f *fakeServer) Hold(_ context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	return f.control(req)
}

func (f *fakeServer) Release(_ context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	return f.control(req)
}

func (f *fakeServer) Requeue(_ context.Context, req *latticev1.JobControlRequest) (*latticev1.JobControlResponse, error) {
	return f.control(req)
}

func (f *fakeServer) Signal(_ context.Context, req *latticev1.SignalRequest) (*latticev1.JobControlResponse, error) {
	r := f.jc()
	jcMu.Lock()
	r.signals = append(r.signals, req)
	jcMu.Unlock()
	return f.answer(req.GetIds()), nil
}

func (f *fakeServer) Update(_ context.Context, req *latticev1.UpdateAllocationRequest) (*latticev1.Allocation, error) {
	r := f.jc()
	jcMu.Lock()
	r.updates = append(r.updates, req)
	jcMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.find(req.GetId()), nil
}

func (f *fakeServer) ListQOS(context.Context, *latticev1.ListQOSRequest) (*latticev1.ListQOSResponse, error) {
	return &latticev1.ListQOSResponse{
		Qos:        []*latticev1.QOS{{Name: "debug", PriorityClass: 8, MaxWalltimeSeconds: 1800, MaxNodes: 8}},
		Partitions: []*latticev1.Partition{{Name: "regular", Vcluster: "hpc-batch"}},
	}, nil
}

func (f *fakeServer) SetQOS(context.Context, *latticev1.SetQOSRequest) (*latticev1.SetQOSResponse, error) {
	return &latticev1.SetQOSResponse{}, nil
}

func (f *fakeServer) SetPartition(context.Context, *latticev1.SetPartitionRequest) (*latticev1.SetPartitionResponse, error) {
	return &latticev1.SetPartitionResponse{}, nil
}

func (f *fakeServer) lastControl() *latticev1.JobControlRequest {
	r := f.jc()
	jcMu.Lock()
	defer jcMu.Unlock()
	return r.controls[len(r.controls)-1]
}

func (f *fakeServer) lastSignal() *latticev1.SignalRequest {
	r := f.jc()
	jcMu.Lock()
	defer jcMu.Unlock()
	return r.signals[len(r.signals)-1]
}

func (f *fakeServer) lastUpdate() *latticev1.UpdateAllocationRequest {
	r := f.jc()
	jcMu.Lock()
	defer jcMu.Unlock()
	return r.updates[len(r.updates)-1]
}

func (f *fakeServer) lastCancel() *latticev1.CancelRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancels[len(f.cancels)-1]
}

func (f *fakeServer) alloc(id string) *latticev1.Allocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.find(id)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
