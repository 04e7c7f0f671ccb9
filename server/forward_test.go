package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// A call forwarded to a member that does not lead (leadership moved, or
// the member restarted and has not caught up) is refused as Unavailable —
// the caller retries — never answered or validated from that member's
// possibly stale state, and never forwarded again.
func TestForwardedCallToAFollowerIsUnavailable(t *testing.T) {
	servers := startTrioWith(t, nil)
	var l *Server
	waitFor(t, 10*time.Second, "a leader", func() bool { l = leaderOf(servers); return l != nil })
	var follower *Server
	for _, s := range servers {
		if s != l {
			follower = s
			break
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), forwardedKey, "1")
	_, err := latticev1.NewAllocationServiceClient(dialPlain(t, follower)).List(ctx, &latticev1.ListAllocationsRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call forwarded to follower %s: %v, want Unavailable", follower.cfg.ID, err)
	}
	// The same call without the mark is forwarded to the leader.
	_, err = latticev1.NewAllocationServiceClient(dialPlain(t, follower)).List(context.Background(), &latticev1.ListAllocationsRequest{})
	if err != nil {
		t.Fatalf("a call to follower %s: %v", follower.cfg.ID, err)
	}
}
