package server

import (
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// setPreemptMode applies `vcluster set --preempt-mode` to vc: off turns
// preemption off (the mode is kept for when it is turned on again); any
// other mode turns it on. "" changes nothing.
func setPreemptMode(vc *model.VCluster, mode string) error {
	if mode == "" {
		return nil
	}
	m, err := model.ParsePreemptMode(mode)
	if err != nil {
		return err
	}
	if m == model.PreemptOff {
		vc.Preemption = false
		return nil
	}
	vc.Preemption, vc.PreemptMode = true, m
	return nil
}

// preemptQOS is the QOS entries that set a preemption mode, by name, for a
// scheduling snapshot; nil when none does.
func preemptQOS(st *quorum.State) map[string]*model.QOS {
	var out map[string]*model.QOS
	for _, q := range st.QOSTable() {
		if q.PreemptMode == "" {
			continue
		}
		if out == nil {
			out = map[string]*model.QOS{}
		}
		q := q
		out[q.Name] = &q
	}
	return out
}
