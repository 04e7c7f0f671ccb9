package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// scontrolUpdateNodes is scontrol update NodeName=LIST State=DRAIN|RESUME
// [Reason=...]: latticectl nodes drain|undrain on every node of the
// hostlist, quietly, as scontrol (one line per node that failed).
func (s *slurmRun) scontrolUpdateNodes(args []string) error {
	var list, state, reason string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("Invalid input: %s", a)
		}
		switch strings.ToLower(k) {
		case "nodename", "node":
			list = v
		case "state":
			state = strings.ToLower(v)
		case "reason":
			reason = v
		default:
			return fmt.Errorf("Update of node %s is not supported by Lattice (NodeName, State=DRAIN|RESUME|UNDRAIN|IDLE, Reason)", k)
		}
	}
	names, err := model.ExpandHostlist(list)
	if err != nil || len(names) == 0 {
		return fmt.Errorf("Invalid node name specified")
	}
	var argv []string
	switch state {
	case "drain":
		if strings.TrimSpace(reason) == "" {
			return fmt.Errorf("You must specify a reason when DOWNING or DRAINING a node. Request denied")
		}
		argv = []string{"nodes", "drain", list, "--reason", reason}
	case "resume", "undrain", "idle":
		argv = []string{"nodes", "undrain", list}
	case "":
		return fmt.Errorf("No changes specified (State=DRAIN|RESUME)")
	default:
		return fmt.Errorf("Invalid node state specified: %s (Lattice's scontrol sets DRAIN, RESUME, UNDRAIN or IDLE; latticectl nodes for the rest)", state)
	}
	var quiet strings.Builder
	env := s.Env
	env.Stderr, env.Stdout = &quiet, io.Discard
	if code := Main(s.c.Context, env, argv); code != 0 {
		msg := strings.TrimSpace(quiet.String())
		for _, line := range strings.Split(msg, "\n") {
			if line = strings.TrimPrefix(strings.TrimSpace(line), "latticectl: "); line != "" && !strings.HasSuffix(line, ": done") {
				fmt.Fprintln(s.Stderr, line)
			}
		}
		return errReported
	}
	return nil
}
