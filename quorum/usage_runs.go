package quorum

import "github.com/latticehpc/lattice/model"

// RecordUsage sets the usage of allocation ID — the sum over its runs so
// far — once a run that a user's requeue stopped has ended (the report of
// that stop carries its usage, which the requeue's own path does not
// keep). RequeueCount is the allocation's requeue count after that stop:
// a later run's end makes the record stale.
type RecordUsage struct {
	Header
	ID           uint64       `json:"id"`
	RequeueCount int          `json:"requeue_count"`
	Usage        *model.Usage `json:"usage"`
}

func (s *State) applyRecordUsage(c *RecordUsage) *Result {
	a := s.allocs[c.ID]
	switch {
	case a == nil:
		return &Result{Rejection: reject(CodeNotFound, "", "allocation %d does not exist", c.ID)}
	case c.Usage == nil:
		return &Result{Rejection: reject(CodeInvalid, "", "record_usage of allocation %d carries no usage", c.ID)}
	case a.RequeueCount != c.RequeueCount:
		return &Result{Rejection: reject(CodeStale, "", "allocation %d is on run %d, not %d", c.ID, a.RequeueCount, c.RequeueCount)}
	}
	cp := modify(a)
	u := *c.Usage
	cp.Usage = &u
	s.replaceAlloc(a, cp)
	s.touch()
	return &Result{Items: []ItemResult{{ID: c.ID, Committed: true}}}
}
