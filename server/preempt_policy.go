package server

import (
	"github.com/latticehpc/lattice/model"
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
