package main

import (
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/agent"
	"github.com/latticehpc/lattice/model"
)

// cgroupFlags configure the cgroups of an agent's jobs (agent/cgroup.go).
func cgroupFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(str("cgroups", agent.CgroupsAuto, "the jobs' cgroups: auto (v2 when writable, else v1, else none), v2, v1 or none (track by process group only)")),
		altsrc.NewStringFlag(str("cgroup-root", "", "the cgroup (a path inside each hierarchy) under which job cgroups are made (default: the agent's own, e.g. its systemd service's with Delegate=yes)")),
		altsrc.NewInt64Flag(&cli.Int64Flag{Name: "cgroup-pids-max", EnvVars: env("cgroup-pids-max"),
			Usage: "at most this many tasks per job on a node (pids controller; 0 = no limit)"}),
		altsrc.NewStringFlag(str("cgroup-reserved-mem", "", "memory kept for the system: all jobs together may use the node's memory less this (Slurm sizes: 2G, 512M; default none)")),
	}
}

// cgroupConfig reads the cgroup flags.
func cgroupConfig(c *cli.Context) (agent.CgroupConfig, error) {
	mode, err := agent.ParseCgroupMode(c.String("cgroups"))
	if err != nil {
		return agent.CgroupConfig{}, usageError{&model.FieldError{Field: "cgroups", Value: c.String("cgroups"), Allowed: "auto, v2, v1 or none"}}
	}
	cfg := agent.CgroupConfig{Mode: mode, Root: c.String("cgroup-root"), PidsMax: c.Int64("cgroup-pids-max")}
	if cfg.PidsMax < 0 {
		return cfg, usageError{&model.FieldError{Field: "cgroup-pids-max", Value: c.String("cgroup-pids-max"), Allowed: "a count >= 0"}}
	}
	if v := c.String("cgroup-reserved-mem"); v != "" {
		mb, err := model.ParseMemoryMB("cgroup-reserved-mem", v)
		if err != nil {
			return cfg, usageError{err}
		}
		cfg.ReservedMemMB = mb
	}
	return cfg, nil
}
