package supervise

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The step guard: the tasks of a step (srun, latticectl run) are the
// agent's own children, not a supervisor's, so nothing but the agent
// would stop them. For each step it starts on a node, the agent also
// starts a step guard — this binary in its own session, outliving the
// agent — that watches the tasks' process groups and stops them (SIGTERM,
// SIGKILL after the grace) once the agent's fence has passed or the
// allocation's walltime (its run's limit file, when the allocation runs
// here) is over, as a job's supervisor does for the job. It exits when
// every group is gone; the agent ends it when the step ends.

// StepGuardEnv, set to the agent's fence file, makes a process a step
// guard: argv is [name, limit file or "", process group ids...].
const StepGuardEnv = "LATTICE_STEP_GUARD"

// StepGuardMain runs the step guard when this process was started as one
// and returns its exit code; ok is false otherwise.
func StepGuardMain() (code int, ok bool) {
	fence := os.Getenv(StepGuardEnv)
	if fence == "" {
		return 0, false
	}
	_ = os.Unsetenv(StepGuardEnv)
	if len(os.Args) < 3 {
		fmt.Fprintf(os.Stderr, "%s: a step guard needs a limit file and process groups\n", BinaryName)
		return 2, true
	}
	var groups []int
	for _, a := range os.Args[2:] {
		g, err := strconv.Atoi(a)
		if err != nil || g <= 1 {
			fmt.Fprintf(os.Stderr, "%s: step guard: process group %q: want an id > 1\n", BinaryName, a)
			return 2, true
		}
		groups = append(groups, g)
	}
	GuardStep(fence, os.Args[1], groups, nil)
	return 0, true
}

// GuardStep watches the process groups until all are gone or done is
// closed; when the fence passed or the walltime in limit (when not "") is
// over, it stops them all and returns once they are gone or killed.
func GuardStep(fence, limit string, groups []int, done <-chan struct{}) {
	tick := time.NewTicker(guardEvery)
	defer tick.Stop()
	for {
		groups = alive(groups)
		if len(groups) == 0 {
			return
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
		now := time.Now()
		why, grace := "", time.Duration(0)
		if d, g, ok := ReadDeadline(fence); ok && now.After(d) {
			why, grace = "its agent has heard no leader since its fencing deadline "+d.UTC().Format(time.RFC3339), g
		} else if d, g, ok := ReadDeadline(limit); limit != "" && ok && now.After(d.Add(walltimeSlack)) {
			why, grace = "past its allocation's time limit "+d.UTC().Format(time.RFC3339)+" and its agent did not end it", g
		}
		if why == "" {
			continue
		}
		groups = alive(groups)
		fmt.Fprintf(os.Stderr, "%s %s: stopping step tasks (process groups %v): %s\n", now.Format(time.RFC3339), BinaryName, groups, why)
		for _, g := range groups {
			_ = syscall.Kill(-g, syscall.SIGTERM)
		}
		end := time.Now().Add(grace)
		for len(groups) > 0 && time.Now().Before(end) {
			time.Sleep(100 * time.Millisecond)
			groups = alive(groups)
		}
		for _, g := range groups {
			_ = syscall.Kill(-g, syscall.SIGKILL)
		}
		return
	}
}

// alive keeps the process groups that still have a member.
func alive(groups []int) []int {
	out := groups[:0]
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			out = append(out, g)
		}
	}
	return out
}
