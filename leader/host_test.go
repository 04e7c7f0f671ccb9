package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/solver"
)

// fsmHost is a Host over an FSM of its own, no Raft: a proposal is
// applied at once, as the next log entry. It counts entries by type.
type fsmHost struct {
	t   *testing.T
	fsm *quorum.FSM
	mu  sync.Mutex
	idx uint64
	n   map[quorum.CommandType]int
}

func newFSMHost(t *testing.T) *fsmHost {
	return &fsmHost{t: t, fsm: quorum.NewFSM(), n: map[quorum.CommandType]int{}}
}

func (h *fsmHost) Propose(_ context.Context, c quorum.Command) (*quorum.Result, error) {
	if hd := c.CommandHeader(); hd.Time.IsZero() {
		hd.Time = time.Now().UTC()
	}
	data, err := quorum.Encode(c)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.idx++
	idx := h.idx
	h.n[c.Type()]++
	h.mu.Unlock()
	return h.fsm.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data}).(*quorum.Result), nil
}

func (h *fsmHost) View(fn func(*quorum.State)) { h.fsm.View(fn) }
func (h *fsmHost) Changed() <-chan struct{}    { return h.fsm.Changed() }

func (h *fsmHost) entries(t quorum.CommandType) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[t]
}

// must proposes c and fails the test on an error or a rejection.
func (h *fsmHost) must(c quorum.Command) *quorum.Result {
	h.t.Helper()
	r, err := h.Propose(context.Background(), c)
	if err != nil {
		h.t.Fatal(err)
	}
	if r.Rejection != nil {
		h.t.Fatal(r.Rejection.Message)
	}
	return r
}

// testVCluster is a valid vCluster of type hpc-batch.
func testVCluster(name string) model.VCluster {
	profile := solver.ProfileForType(model.TypeHPCBatch)
	w, _ := solver.Profile(profile)
	return model.VCluster{Name: name, Type: model.TypeHPCBatch, WeightsProfile: profile, Weights: w,
		CycleInterval: model.DefaultCycleInterval, MinInterval: model.DefaultMinInterval,
		ReservationDepth: model.DefaultReservationDepth, Algorithm: model.AlgorithmFor(model.TypeHPCBatch), MaxLendFraction: 1,
		ReclaimGrace: model.DefaultReclaimGrace, ReclaimBackoff: model.DefaultReclaimBackoff, PreemptHorizon: model.DefaultPreemptHorizon}
}
