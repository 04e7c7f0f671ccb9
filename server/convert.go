package server

import (
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/rpc/convert"
	"github.com/latticehpc/lattice/solver"
	"github.com/latticehpc/lattice/vcluster"
)

func explanationToProto(id string, state model.AllocState, e *vcluster.Explanation) *latticev1.Explanation {
	p := &latticev1.Explanation{
		Id: id, State: string(state), Reason: e.Reason, Score: e.Score,
		ExpectedStartUnixMs: convert.UnixMS(e.ExpectedStart), Message: e.Message,
		ComputedUnixMs: convert.UnixMS(e.Computed), WeightsProfile: e.Profile, QueuePosition: int32(e.Position),
		Nodes: e.Nodes, Reservation: e.Reservation,
	}
	for i := range model.NumFactors {
		info := solver.Factors[i]
		p.Factors = append(p.Factors, &latticev1.FactorScore{
			Name: info.Name, Title: info.Title, Value: e.Factors[i], Weight: e.Weights[i],
			Contribution: e.Factors[i] * e.Weights[i],
		})
	}
	f := e.Filtered
	for _, fc := range []struct {
		name string
		n    int
	}{{"constraint", f.Constraint}, {"state", f.State}, {"ownership", f.Ownership}, {"busy", f.Busy}, {"power", f.Power}} {
		p.Filtered = append(p.Filtered, &latticev1.FilterCount{Filter: fc.name, Removed: int32(fc.n)})
	}
	return p
}
