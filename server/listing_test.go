package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/cli"
)

// TestStatusWith100000EndedAllocations: one array of 100,000 tasks with a
// script, cancelled, used to make every listing exceed the gRPC message
// limit. Pages keep each answer small; `latticectl status` reads them all.
func TestStatusWith100000EndedAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 allocations")
	}
	d := startDevWith(t, t.TempDir(), 2, []string{"hpc-batch"}, func(c *Config) { c.MaxArraySize = 100001 })
	script := "#!/bin/sh\n" + strings.Repeat("# a comment line of a script\n", 30) + "sleep 1000\n"
	resp, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Name: "huge", NodesMin: 2, WalltimeSeconds: 60, Script: script,
		Array: &latticev1.ArraySpec{Start: 0, End: 99999, Step: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Ids) != 100000 {
		t.Fatalf("%d tasks", len(resp.Ids))
	}
	if _, err := d.allocs.Cancel(context.Background(), &latticev1.CancelRequest{Ids: []string{resp.DisplayId}}); err != nil {
		t.Fatal(err)
	}

	// A plain client with gRPC's default 4 MiB receive limit.
	conn, err := grpc.NewClient(d.srv.APIAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := latticev1.NewAllocationServiceClient(conn)
	req := &latticev1.ListAllocationsRequest{}
	seen, pages := 0, 0
	for {
		page, err := client.List(context.Background(), req)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if n := proto.Size(page); n > 3<<20 {
			t.Fatalf("page %d is %d bytes", pages, n)
		}
		for _, a := range page.Allocations {
			if a.State != "CANCELLED" || a.Request.GetScript() != "" {
				t.Fatalf("allocation %s: state %s, script of %d bytes in a listing", a.DisplayId, a.State, len(a.Request.GetScript()))
			}
		}
		seen += len(page.Allocations)
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	if seen != 100000 || pages < 2 {
		t.Fatalf("listed %d allocations in %d pages, want 100000 in several", seen, pages)
	}
	// Get finds every task; an ended one no longer carries its script
	// (compact stored form: the state keeps scripts for live work only).
	one, err := client.Get(context.Background(), &latticev1.GetAllocationRequest{Id: resp.DisplayId + "_7"})
	if err != nil || one.State != "CANCELLED" || one.Request.Script != "" || one.Request.NodesMin != 2 {
		t.Fatalf("Get of an ended task: %v, %v", one, err)
	}

	// latticectl status, as a user runs it.
	var out, errb bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }, Now: time.Now, Location: time.UTC}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code := cli.Main(ctx, env, []string{"--server", d.srv.APIAddr(), "status"}); code != 0 {
		t.Fatalf("latticectl status: exit %d: %s", code, errb.String())
	}
	if lines := strings.Count(out.String(), "\n"); lines != 100001 {
		t.Fatalf("latticectl status printed %d lines, want a header and 100000 rows", lines)
	}
}

// TestSubmitBoundsOverGRPC: the server checks bounds itself (a client other
// than latticectl may send anything): a walltime of 584 years is refused
// before it is converted (it used to wrap around to an hour), CRLF scripts
// and oversized environments are refused naming the limit, a Latin-1
// comment (sent as U+FFFD, the API's strings are UTF-8) is accepted.
func TestSubmitBoundsOverGRPC(t *testing.T) {
	d := startDev(t, t.TempDir(), 2)
	cases := []struct {
		name string
		req  *latticev1.AllocationRequest
		want string // "" = accepted
	}{
		{"584 years", &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, WalltimeSeconds: 584 * 365 * 24 * 3600}, "walltime"},
		{"crlf", &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Script: "#!/bin/sh\r\ntrue\r\n"}, "DOS line breaks (CRLF)"},
		{"huge env", &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"},
			Env: []string{"K=" + strings.Repeat("v", 300<<10)}}, "at most 262144 bytes"},
		{"many dependencies", &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"},
			DependsOn: []*latticev1.Dependency{{Condition: "afterany", Ids: make([]uint64, 1001)}}}, "at most 1000 dependencies"},
		{"latin-1 comment", &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Script: "#!/bin/sh\n# caf\uFFFD\ntrue\n"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: c.req})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 400 {
				t.Fatalf("Submit = %v, want InvalidArgument naming %q (without echoing the input)", err, c.want)
			}
		})
	}
}
