package vcluster

import "context"

// The Proposer interface gained Reclaim and Preempt; the recording fake of
// vcluster_test.go proposes neither, so these commit nothing.

func (f *fakeProposer) Reclaim(context.Context, string, []ReclaimProposal) ([]Outcome, error) {
	return nil, nil
}

func (f *fakeProposer) Preempt(context.Context, string, []PreemptProposal) ([]Outcome, error) {
	return nil, nil
}
