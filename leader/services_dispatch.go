package leader

import (
	"context"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// serviceAssignment adds what an agent needs to run a service instance.
func serviceAssignment(st *quorum.State, a *model.Allocation, as *latticev1.Assignment) *latticev1.Assignment {
	if a.Service == "" {
		return as
	}
	as.Service = a.Service
	if v := st.Service(a.Service); v != nil {
		as.ServiceMetric = v.Metric
	}
	return as
}

// allocGrace is the SIGTERM→SIGKILL time of an allocation: its own (a service
// instance's drain time) or the site's.
func allocGrace(a *model.Allocation, site int64) int64 {
	if a.StopGrace > 0 {
		return max(int64((a.StopGrace+time.Second-1)/time.Second), 1)
	}
	return site
}

// serviceLoop is this term's services controller (services.go).
func (t *Term) serviceLoop(ctx context.Context) {
	c := &ServiceController{Host: t.host, Samples: t.cfg.ServiceSamples, Metrics: t.cfg.ServiceMetrics,
		Clock: t.cfg.Clock, Log: t.log, Interval: t.cfg.ServiceInterval, BackoffReset: t.cfg.ServiceBackoffReset}
	c.Run(ctx)
}
