package server

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// TestJobControlPermissions: users hold, release, requeue, update and
// signal their own work only; tenant-admins their tenant's; admins all; only
// an admin lifts an admin's hold, changes the QOS table or keeps a request
// that never fits.
func TestJobControlPermissions(t *testing.T) {
	s := startSecured(t)
	allocs := latticev1.NewAllocationServiceClient(s.conn)
	// A begin time an hour out keeps the job PENDING after every release,
	// so no scheduling cycle can start it between two steps of the test.
	later := time.Now().Add(time.Hour).UnixMilli()
	held := func(who, tenant string) string {
		t.Helper()
		r, err := allocs.Submit(s.as(who), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
			Tenant: tenant, NodesMin: 1, WalltimeSeconds: 300, Command: []string{"true"}, Hold: true, BeginUnixMs: later}})
		if err != nil {
			t.Fatalf("%s submits: %v", who, err)
		}
		return r.DisplayId
	}
	reason := func(id string) string {
		t.Helper()
		a, err := allocs.Get(s.as("root"), &latticev1.GetAllocationRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		return a.Reason
	}
	ok := func(what string, r *latticev1.JobControlResponse, err error) {
		t.Helper()
		if err != nil || len(r.Results) != 1 || !r.Results[0].Ok {
			t.Fatalf("%s: %v %v", what, r, err)
		}
	}
	refused := func(what string, r *latticev1.JobControlResponse, err error, words ...string) {
		t.Helper()
		if err != nil {
			wantCode(t, what, err, codes.PermissionDenied, words...)
			return
		}
		if len(r.Results) != 1 || r.Results[0].Ok {
			t.Fatalf("%s: accepted: %v", what, r)
		}
		for _, w := range words {
			if !strings.Contains(r.Results[0].Error, w) {
				t.Fatalf("%s: %q lacks %q", what, r.Results[0].Error, w)
			}
		}
	}
	req := func(id string) *latticev1.JobControlRequest { return &latticev1.JobControlRequest{Ids: []string{id}} }

	bobs := held("bob", "bio")
	// Another tenant's user may do nothing to it.
	r, err := allocs.Release(s.as("alice"), req(bobs))
	refused("alice releases bob's", r, err, "may not release allocation "+bobs)
	r, err = allocs.Hold(s.as("alice"), req(bobs))
	refused("alice holds bob's", r, err, "may not hold")
	r, err = allocs.Requeue(s.as("alice"), req(bobs))
	refused("alice requeues bob's", r, err, "may not requeue")
	r, err = allocs.Signal(s.as("alice"), &latticev1.SignalRequest{Ids: []string{bobs}, Signal: "USR1"})
	refused("alice signals bob's", r, err, "may not signal")
	name := "mine"
	_, err = allocs.Update(s.as("alice"), &latticev1.UpdateAllocationRequest{Id: bobs, Name: &name})
	wantCode(t, "alice updates bob's", err, codes.PermissionDenied, "may not update")

	// The owner's hold is a user hold; the tenant-admin's too; an admin's is an admin hold.
	if reason(bobs) != model.ReasonJobHeldUser {
		t.Fatalf("bob's held job: %s", reason(bobs))
	}
	r, err = allocs.Hold(s.as("root"), req(bobs))
	ok("root holds", r, err)
	if reason(bobs) != model.ReasonJobHeldAdmin {
		t.Fatalf("after root's hold: %s", reason(bobs))
	}
	r, err = allocs.Release(s.as("bob"), req(bobs))
	refused("bob releases an admin hold", r, err, "only an admin can release it")
	r, err = allocs.Release(s.as("carol"), req(bobs))
	refused("carol releases an admin hold", r, err, "only an admin can release it")
	r, err = allocs.Release(s.as("root"), req(bobs))
	ok("root releases", r, err)
	r, err = allocs.Hold(s.as("carol"), &latticev1.JobControlRequest{Ids: []string{bobs}})
	ok("carol (tenant-admin of bio) holds bob's", r, err)
	if reason(bobs) != model.ReasonJobHeldUser {
		t.Fatalf("after carol's hold: %s", reason(bobs))
	}
	r, err = allocs.Release(s.as("bob"), req(bobs))
	ok("bob releases a user hold", r, err)

	// Priority within the caller's ceiling (5 by default).
	alices := held("alice", "physics")
	high := int32(9)
	_, err = allocs.Update(s.as("alice"), &latticev1.UpdateAllocationRequest{Id: alices, PriorityClass: &high})
	wantCode(t, "alice raises her class to 9", err, codes.PermissionDenied, "QOS ceiling")
	low := int32(2)
	if _, err := allocs.Update(s.as("alice"), &latticev1.UpdateAllocationRequest{Id: alices, PriorityClass: &low}); err != nil {
		t.Fatalf("alice lowers her class: %v", err)
	}

	// Site configuration: everyone reads, admins change.
	if _, err := allocs.ListQOS(s.as("alice"), &latticev1.ListQOSRequest{}); err != nil {
		t.Fatalf("alice lists the QOS table: %v", err)
	}
	_, err = allocs.SetQOS(s.as("alice"), &latticev1.SetQOSRequest{Qos: &latticev1.QOS{Name: "mine", PriorityClass: 10}})
	wantCode(t, "alice sets a QOS", err, codes.PermissionDenied)
	_, err = allocs.SetPartition(s.as("carol"), &latticev1.SetPartitionRequest{Name: "p", Vcluster: "hpc-batch"})
	wantCode(t, "carol sets a partition", err, codes.PermissionDenied)
	if _, err := allocs.SetQOS(s.as("root"), &latticev1.SetQOSRequest{Qos: &latticev1.QOS{Name: "mine", PriorityClass: 3}}); err != nil {
		t.Fatalf("root sets a QOS: %v", err)
	}

	// More nodes than the tenant's quota ever allows.
	admin := latticev1.NewAdminServiceClient(s.conn)
	if _, err := admin.SetTenant(s.as("root"), &latticev1.SetTenantRequest{Name: "physics", MaxNodes: 2}); err != nil {
		t.Fatal(err)
	}
	_, err = allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{Tenant: "physics", NodesMin: 3, WalltimeSeconds: 60, Command: []string{"true"}}})
	wantCode(t, "3 nodes over a quota of 2", err, codes.InvalidArgument, "nodes: 3 requested, tenant physics may use at most 2")

	// Never fits: only an admin keeps one without holding it.
	big := &latticev1.AllocationRequest{Tenant: "physics", NodesMin: 2, WalltimeSeconds: 60, Command: []string{"true"}, GpusPerNode: 8, KeepIfNeverFits: true}
	_, err = allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: big})
	wantCode(t, "alice keeps a request that never fits", err, codes.PermissionDenied, "only an admin")
	big.KeepIfNeverFits = false
	_, err = allocs.Submit(s.as("alice"), &latticev1.SubmitRequest{Request: big})
	wantCode(t, "alice submits a request that never fits", err, codes.InvalidArgument, "can have at most 0 nodes that meet its constraints")
	big.KeepIfNeverFits = true
	if _, err := allocs.Submit(s.as("root"), &latticev1.SubmitRequest{Request: big}); err != nil {
		t.Fatalf("root keeps it: %v", err)
	}
}
