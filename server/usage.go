package server

import (
	"math"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// UsageToProto converts a run's measured usage (nil stays nil).
func UsageToProto(u *model.Usage) *latticev1.JobUsage {
	if u == nil {
		return nil
	}
	return &latticev1.JobUsage{UserCpuSeconds: u.UserCPUSeconds, SystemCpuSeconds: u.SystemCPUSeconds,
		MaxRssBytes: u.MaxRSSBytes, MaxRssSampled: u.MaxRSSSampled, ConsumedEnergyJoules: u.EnergyJoules,
		EnergySource: u.EnergySource, OomKills: u.OOMKills}
}

// usageFromProto converts an agent's figures; nonsense (negative, NaN,
// an unknown energy source) is dropped rather than committed.
func usageFromProto(p *latticev1.JobUsage) *model.Usage {
	if p == nil {
		return nil
	}
	finite := func(f float64) float64 {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	u := &model.Usage{UserCPUSeconds: finite(p.UserCpuSeconds), SystemCPUSeconds: finite(p.SystemCpuSeconds),
		MaxRSSBytes: max(p.MaxRssBytes, 0), MaxRSSSampled: p.MaxRssSampled, EnergyJoules: finite(p.ConsumedEnergyJoules),
		OOMKills: max(p.OomKills, 0)}
	if p.EnergySource == model.EnergyRAPL || p.EnergySource == model.EnergyModel {
		u.EnergySource = p.EnergySource
	} else {
		u.EnergyJoules = 0
	}
	return u
}
