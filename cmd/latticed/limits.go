package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/latticehpc/lattice/dag"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/server"
)

func maxArraySizeFlag() *cli.IntFlag {
	return &cli.IntFlag{Name: "max-array-size", Value: model.DefaultMaxArraySize, EnvVars: env("max-array-size"),
		Usage: fmt.Sprintf("array indexes must be below this, as Slurm's MaxArraySize (at most %d)", model.MaxArrayTasks)}
}

func maxDAGStagesFlag() *cli.IntFlag {
	return &cli.IntFlag{Name: "max-dag-stages", Value: dag.DefaultMaxStages, EnvVars: env("max-dag-stages"),
		Usage: fmt.Sprintf("most allocations (stages) one DAG workflow may have (at most %d)", model.MaxArrayTasks)}
}

// maxStartsFlag is --max-starts-per-cycle (server.Config.MaxStartsPerCycle).
func maxStartsFlag() *cli.IntFlag {
	return &cli.IntFlag{Name: "max-starts-per-cycle", Value: server.DefaultMaxStartsPerCycle, EnvVars: env("max-starts-per-cycle"),
		Usage: "most allocations one vCluster's scheduling cycle starts, as Slurm's sched_max_job_start; the rest start in the cycles that follow (0 = no limit)"}
}

// maxStarts reads --max-starts-per-cycle.
func maxStarts(c *cli.Context) (int, error) {
	n := c.Int("max-starts-per-cycle")
	if n < 0 || n > model.MaxArrayTasks {
		return 0, usageError{&model.FieldError{Field: "max-starts-per-cycle", Value: fmt.Sprint(n), Allowed: fmt.Sprintf("0 (no limit) or 1..%d", model.MaxArrayTasks)}}
	}
	return n, nil
}

// limitFlags reads --max-array-size and --max-dag-stages.
func limitFlags(c *cli.Context) (maxArray, maxStages int, err error) {
	maxArray, maxStages = c.Int("max-array-size"), c.Int("max-dag-stages")
	if maxArray < 1 || maxArray > model.MaxArrayTasks {
		return 0, 0, usageError{&model.FieldError{Field: "max-array-size", Value: fmt.Sprint(maxArray), Allowed: fmt.Sprintf("1..%d", model.MaxArrayTasks)}}
	}
	if maxStages < 1 || maxStages > model.MaxArrayTasks {
		return 0, 0, usageError{&model.FieldError{Field: "max-dag-stages", Value: fmt.Sprint(maxStages), Allowed: fmt.Sprintf("1..%d", model.MaxArrayTasks)}}
	}
	return maxArray, maxStages, nil
}
