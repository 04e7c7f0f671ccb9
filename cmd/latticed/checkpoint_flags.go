package main

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/checkpoint"
)

// The checkpoint cost model's parameters, one flag each (and so one key of
// the --config YAML file and one LATTICE_ environment variable), named
// checkpoint-<parameter> after docs/checkpoint.md.
var checkpointParamFlags = []struct {
	key   string
	usage string
	f64   func(*checkpoint.Params) *float64
	dur   func(*checkpoint.Params) *time.Duration
}{
	{key: "default_checkpoint_minutes", usage: "minutes one checkpoint takes when the job gave no estimate",
		f64: func(p *checkpoint.Params) *float64 { return &p.DefaultCheckpointMinutes }},
	{key: "failure_rate_per_node_hour", usage: "node failures per node-hour (work a checkpoint saves from them)",
		f64: func(p *checkpoint.Params) *float64 { return &p.FailureRatePerNodeHour }},
	{key: "reclaim_rate_per_hour", usage: "reclaims per hour expected for work on borrowed nodes",
		f64: func(p *checkpoint.Params) *float64 { return &p.ReclaimRatePerHour }},
	{key: "preempt_rate_per_hour", usage: "preemptions per hour expected for class-0 work",
		f64: func(p *checkpoint.Params) *float64 { return &p.PreemptRatePerHour }},
	{key: "preemptability_weight", usage: "weight of being cheap to preempt, 0..1",
		f64: func(p *checkpoint.Params) *float64 { return &p.PreemptabilityWeight }},
	{key: "backlog_weight", usage: "weight of backlog relief, 0..1",
		f64: func(p *checkpoint.Params) *float64 { return &p.BacklogWeight }},
	{key: "compute_waste_fraction", usage: "compute lost per unit of checkpoint write time",
		f64: func(p *checkpoint.Params) *float64 { return &p.ComputeWasteFraction }},
	{key: "storage_cost_node_hours", usage: "storage cost of one checkpoint, node-hours per node",
		f64: func(p *checkpoint.Params) *float64 { return &p.StorageCostNodeHours }},
	{key: "min_interval", usage: "least time between two proactive checkpoints of one allocation",
		dur: func(p *checkpoint.Params) *time.Duration { return &p.MinInterval }},
	{key: "min_run_time", usage: "least run time before the first proactive checkpoint",
		dur: func(p *checkpoint.Params) *time.Duration { return &p.MinRunTime }},
	{key: "end_proximity_window", usage: "preempting work this close to its walltime end costs more",
		dur: func(p *checkpoint.Params) *time.Duration { return &p.EndProximityWindow }},
}

func checkpointFlagName(key string) string {
	return "checkpoint-" + strings.ReplaceAll(key, "_", "-")
}

// checkpointFlags are the broker's flags, wrapped for the YAML config file.
func checkpointFlags() []cli.Flag {
	def := checkpoint.DefaultParams()
	var out []cli.Flag
	for _, f := range checkpointParamFlags {
		name := checkpointFlagName(f.key)
		if f.f64 != nil {
			out = append(out, altsrc.NewFloat64Flag(&cli.Float64Flag{Name: name, Value: *f.f64(&def), Usage: "checkpoint model: " + f.usage, EnvVars: env(name)}))
		} else {
			out = append(out, altsrc.NewDurationFlag(dur(name, *f.dur(&def), "checkpoint model: "+f.usage)))
		}
	}
	return append(out,
		altsrc.NewDurationFlag(dur("checkpoint-broker-interval", 15*time.Second, "how often the checkpoint broker looks for --signal lead times and proactive checkpoints")),
		altsrc.NewBoolFlag(&cli.BoolFlag{Name: "proactive-checkpoints", Value: true, Usage: "let the broker checkpoint long runners when the cost model says so", EnvVars: env("proactive-checkpoints")}),
	)
}

// checkpointParams reads the model's parameters from the flags; the server
// validates them.
func checkpointParams(c *cli.Context) checkpoint.Params {
	p := checkpoint.DefaultParams()
	for _, f := range checkpointParamFlags {
		name := checkpointFlagName(f.key)
		if f.f64 != nil {
			*f.f64(&p) = c.Float64(name)
		} else {
			*f.dur(&p) = c.Duration(name)
		}
	}
	return p
}
