package server

import (
	"fmt"
	"slices"
	"strings"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/leader"
)

// stepCandidates are the nodes a step may use: the allocation's, or those
// of them srun -w names (in the allocation's order).
func stepCandidates(allocNodes, nodeList []string) ([]string, error) {
	if len(nodeList) == 0 {
		return allocNodes, nil
	}
	var out []string
	for _, n := range allocNodes {
		if slices.Contains(nodeList, n) {
			out = append(out, n)
		}
	}
	for _, n := range nodeList {
		if !slices.Contains(allocNodes, n) {
			return nil, fmt.Errorf("invalid nodelist: %s is not a node of the allocation (allowed: %s)", n, strings.Join(allocNodes, ","))
		}
	}
	return out, nil
}

// StepMPITypes are the values of srun --mpi a step accepts: none (no
// PMI), pmi2 (a PMI-1 and PMI-2 server in the step, over PMI_FD); pmi1
// and pmi are pmi2's aliases here, as Slurm's pmi2 plugin also serves
// PMI-1 clients.
var StepMPITypes = []string{"none", "pmi2", "pmi1", "pmi"}

func checkStepMPI(mpi string) error {
	if mpi == "" || slices.Contains(StepMPITypes, mpi) {
		return nil
	}
	if strings.HasPrefix(mpi, "pmix") {
		return fmt.Errorf("invalid mpi %q: Lattice has no PMIx server; use --mpi=pmi2 (MPICH, Intel MPI) or mpirun inside the job (Open MPI); allowed: %s", mpi, strings.Join(StepMPITypes, ", "))
	}
	return fmt.Errorf("invalid mpi %q: allowed %s", mpi, strings.Join(StepMPITypes, ", "))
}

// pmiFences gathers the nodes' parts of a step's PMI fences (srun
// --mpi=pmi2): when every node of the step has sent fence seq, each
// agent gets every node's puts (StepPMIFenceDone) and the fence ends.
type pmiFences map[int32]*pmiFence

type pmiFence struct {
	nodes        map[string]bool
	keys, values []string
}

func (f pmiFences) add(part *latticev1.StepPMIFence, conns []*leader.AgentConn, plan []nodeTasks, alloc uint64, step int32) {
	in := false
	for _, p := range plan {
		in = in || p.node == part.Node
	}
	if !in {
		return
	}
	cur := f[part.Seq]
	if cur == nil {
		cur = &pmiFence{nodes: map[string]bool{}}
		f[part.Seq] = cur
	}
	if cur.nodes[part.Node] {
		return
	}
	cur.nodes[part.Node] = true
	n := min(len(part.Keys), len(part.Values))
	cur.keys, cur.values = append(cur.keys, part.Keys[:n]...), append(cur.values, part.Values[:n]...)
	if len(cur.nodes) < len(plan) {
		return
	}
	delete(f, part.Seq)
	done := &latticev1.ServerMessage{Msg: &latticev1.ServerMessage_StepPmiFenceDone{StepPmiFenceDone: &latticev1.StepPMIFenceDone{
		AllocationId: alloc, StepId: step, Seq: part.Seq, Keys: cur.keys, Values: cur.values}}}
	seen := map[*leader.AgentConn]bool{}
	for _, c := range conns {
		if !seen[c] {
			seen[c] = true
			c.Send(done)
		}
	}
}
