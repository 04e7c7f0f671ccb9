package quorum

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRememberedRequestsAtTheLimit checks the idempotency table once it is
// full: it keeps exactly the newest MaxRememberedRequests ids in order, a
// retry of a kept id returns the first outcome, a forgotten id applies anew.
func TestRememberedRequestsAtTheLimit(t *testing.T) {
	s := NewState()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const extra = 25
	var ids []string
	for i := range MaxRememberedRequests + extra {
		id := fmt.Sprintf("req-%d", i)
		ids = append(ids, id)
		s.apply(&SetMember{Header: Header{RequestID: id, Time: now}, Member: Member{ID: fmt.Sprintf("m%d", i%2)}})
	}
	if !slices.Equal(s.requestOrder, ids[extra:]) {
		t.Fatalf("remembered %d ids from %q, want the newest %d from %q", len(s.requestOrder), s.requestOrder[0], MaxRememberedRequests, ids[extra])
	}
	if len(s.requests) != MaxRememberedRequests {
		t.Fatalf("%d results remembered, want %d", len(s.requests), MaxRememberedRequests)
	}
	kept := ids[extra]
	first := s.requests[kept]
	if r := s.apply(&SetMember{Header: Header{RequestID: kept, Time: now}, Member: Member{ID: "other"}}); r != first {
		t.Fatalf("retry of kept id %s applied again (result %+v)", kept, r)
	}
	if _, ok := s.Member("other"); ok {
		t.Fatalf("retry of kept id %s changed state", kept)
	}
	forgotten := ids[extra-1]
	s.apply(&SetMember{Header: Header{RequestID: forgotten, Time: now}, Member: Member{ID: "other"}})
	if _, ok := s.Member("other"); !ok {
		t.Fatalf("forgotten id %s was not applied anew", forgotten)
	}
	if got := s.requestOrder[len(s.requestOrder)-1]; got != forgotten || len(s.requestOrder) != MaxRememberedRequests {
		t.Fatalf("after re-applying %s: newest %s, %d remembered", forgotten, got, len(s.requestOrder))
	}
}
