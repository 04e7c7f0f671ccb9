package quorum

import (
	"strings"
	"testing"
)

// A cluster is named once: the first id committed stays (through
// snapshots and an encode/decode of the command), a second is refused,
// and a malformed one is invalid.
func TestClusterIDIsSetOnce(t *testing.T) {
	s := NewState()
	const first, second = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	if err := CheckClusterID(first); err != nil {
		t.Fatal(err)
	}
	b, err := Encode(&SetClusterID{ID: first})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.apply(c); r.Rejection != nil {
		t.Fatal(r.Rejection)
	}
	if r := s.apply(&SetClusterID{ID: first}); r.Rejection != nil {
		t.Errorf("the same id again: %v, want accepted (idempotent)", r.Rejection)
	}
	if r := s.apply(&SetClusterID{ID: second}); r.Rejection == nil || r.Rejection.Code != CodeConflict || !strings.Contains(r.Rejection.Message, first) {
		t.Errorf("another id: %+v, want a conflict naming %s", r.Rejection, first)
	}
	if r := s.apply(&SetClusterID{ID: "Not-Hex"}); r.Rejection == nil || r.Rejection.Code != CodeInvalid {
		t.Errorf("a malformed id: %+v, want invalid", r.Rejection)
	}
	if got := restored(t, s).ClusterID(); got != first {
		t.Errorf("after a snapshot: cluster id %q, want %q", got, first)
	}
	if got := NewState().ClusterID(); got != "" {
		t.Errorf("a new state's cluster id %q, want none", got)
	}
}
