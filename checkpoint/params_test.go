package checkpoint

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestParamsValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Params)
		want   []string // substrings of the error; none = valid
	}{
		{"defaults", func(*Params) {}, nil},
		{"zeros where allowed", func(p *Params) {
			p.FailureRatePerNodeHour, p.ReclaimRatePerHour, p.PreemptRatePerHour = 0, 0, 0
			p.PreemptabilityWeight, p.BacklogWeight, p.ComputeWasteFraction, p.StorageCostNodeHours = 0, 0, 0, 0
			p.MinInterval, p.MinRunTime, p.EndProximityWindow = 0, 0, 0
		}, nil},
		{"upper bounds", func(p *Params) {
			p.PreemptabilityWeight, p.BacklogWeight = 1, 1
			p.DefaultCheckpointMinutes = 525600
			p.MinInterval = model.MaxWalltime
		}, nil},
		{"zero default minutes", func(p *Params) { p.DefaultCheckpointMinutes = 0 },
			[]string{`invalid checkpoint.default_checkpoint_minutes "0": allowed a number of minutes > 0 and at most 525600`}},
		{"NaN failure rate", func(p *Params) { p.FailureRatePerNodeHour = math.NaN() },
			[]string{`checkpoint.failure_rate_per_node_hour "NaN"`, ">= 0"}},
		{"infinite reclaim rate", func(p *Params) { p.ReclaimRatePerHour = math.Inf(1) },
			[]string{`checkpoint.reclaim_rate_per_hour "+Inf"`}},
		{"negative preempt rate", func(p *Params) { p.PreemptRatePerHour = -0.1 },
			[]string{`checkpoint.preempt_rate_per_hour "-0.1"`}},
		{"weight above 1", func(p *Params) { p.PreemptabilityWeight = 1.5 },
			[]string{`checkpoint.preemptability_weight "1.5": allowed a fraction from 0 to 1`}},
		{"negative backlog weight", func(p *Params) { p.BacklogWeight = -1 },
			[]string{`checkpoint.backlog_weight "-1"`}},
		{"negative waste", func(p *Params) { p.ComputeWasteFraction = -0.2 },
			[]string{`checkpoint.compute_waste_fraction "-0.2"`}},
		{"NaN storage", func(p *Params) { p.StorageCostNodeHours = math.NaN() },
			[]string{`checkpoint.storage_cost_node_hours "NaN"`}},
		{"negative interval", func(p *Params) { p.MinInterval = -time.Minute },
			[]string{`invalid checkpoint.min_interval "-1m0s": allowed a duration from 0 to 365 days`}},
		{"min run time above a year", func(p *Params) { p.MinRunTime = model.MaxWalltime + time.Hour },
			[]string{`checkpoint.min_run_time "8761h0m0s"`}},
		{"negative window", func(p *Params) { p.EndProximityWindow = -1 },
			[]string{`checkpoint.end_proximity_window "-1ns"`}},
		{"every bad field reported, in field order", func(p *Params) {
			p.DefaultCheckpointMinutes = -1
			p.BacklogWeight = 2
			p.EndProximityWindow = -time.Hour
		}, []string{"checkpoint.default_checkpoint_minutes", "\ninvalid checkpoint.backlog_weight", "\ninvalid checkpoint.end_proximity_window"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultParams()
			tc.change(&p)
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error with %q", tc.want)
			}
			msg := err.Error()
			last := -1
			for _, w := range tc.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("Validate = %q, want it to contain %q", msg, w)
				}
				if i < last {
					t.Fatalf("Validate = %q: %q out of order", msg, w)
				}
				last = i
			}
			var fe *model.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "checkpoint.") {
				t.Errorf("Validate error is not a *model.FieldError on a checkpoint.* field: %#v", err)
			}
			want := 1
			if strings.HasPrefix(tc.name, "every bad field") {
				want = 3
			}
			if got := strings.Count(msg, "invalid checkpoint."); got != want {
				t.Errorf("Validate reported %d fields, want %d: %q", got, want, msg)
			}
		})
	}
}

// TestDefaultParamsDocumented checks DefaultParams against the defaults the
// field comments and docs/checkpoint.md promise.
func TestDefaultParamsDocumented(t *testing.T) {
	want := Params{DefaultCheckpointMinutes: 5, FailureRatePerNodeHour: 1e-4, ReclaimRatePerHour: 0.02,
		PreemptRatePerHour: 0.005, PreemptabilityWeight: 0.25, BacklogWeight: 0.02, ComputeWasteFraction: 0.2,
		StorageCostNodeHours: 0.01, MinInterval: time.Hour, MinRunTime: 30 * time.Minute, EndProximityWindow: time.Hour}
	if got := DefaultParams(); got != want {
		t.Errorf("DefaultParams = %+v, want %+v", got, want)
	}
}
