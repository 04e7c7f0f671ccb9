package leader

import (
	"os"
	"runtime"
	"sync"
)

// loopProcs gives every scheduler loop that runs in this process a Go
// processor (P) of its own: GOMAXPROCS is one higher for each loop while
// it runs (Config.LoopProcs).
//
// Why: a cycle is tens of milliseconds of CPU without a pause (at 100,000
// pending, ~50 ms for hpc-batch). With GOMAXPROCS at the number of CPUs
// (2 here) two overlapping cycles hold every P, and Raft's goroutines, the
// FSM and the gRPC writers that answer Submit wait at the Go level for the
// runtime to preempt a cycle (every 10 ms) even while the OS has a CPU for
// them. With a P per loop they are runnable threads the OS schedules at
// once, and a cycle can only ever take the CPU the OS gives it. Measured
// in docs/scale.md ("The submit tail and the scheduler's Go processors").
//
// Nothing changes when GOMAXPROCS is set in the environment: an operator
// who set it keeps exactly what was asked for.
var loopProcs = procBudget{fixed: os.Getenv("GOMAXPROCS") != ""}

type procBudget struct {
	mu    sync.Mutex
	fixed bool
	extra int // Ps added, one per running loop
}

// add changes GOMAXPROCS by d (a loop started: +1; ended: -1).
func (p *procBudget) add(d int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fixed {
		return
	}
	p.extra += d
	if p.extra == 0 {
		// Back to the runtime's own value, and to its updates when the
		// process's CPU limit changes (setting GOMAXPROCS stops them).
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)+d))
}

// added is how many Ps the running loops added.
func (p *procBudget) added() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.extra
}

// AddedProcs is how many Go processors the running scheduler loops of
// this process added, and whether GOMAXPROCS is fixed by the environment
// (then none are).
func AddedProcs() (n int, fixed bool) { return loopProcs.added(), loopProcs.fixed }
