package server

import (
	"fmt"
	"testing"
)

func TestPlanStep(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4"}
	tests := []struct {
		nodes, tasks, perNode int
		want                  string // tasks per node
		ntasks                int
		err                   bool
	}{
		{0, 0, 0, "[1 1 1 1]", 4, false},
		{0, 8, 0, "[2 2 2 2]", 8, false},
		{0, 6, 0, "[2 2 1 1]", 6, false},
		{0, 2, 0, "[1 1]", 2, false},
		{2, 0, 0, "[1 1]", 2, false},
		{2, 5, 0, "[3 2]", 5, false},
		{0, 0, 3, "[3 3 3 3]", 12, false},
		{0, 5, 2, "[2 2 1]", 5, false},
		{2, 0, 2, "[2 2]", 4, false},
		{5, 0, 0, "", 0, true},
		// As Slurm's srun: fewer tasks than nodes use fewer nodes, and a
		// --ntasks-per-node that does not match is ignored.
		{3, 2, 0, "[1 1]", 2, false},
		{2, 5, 2, "[3 2]", 5, false},
		{1, 4, 2, "[4]", 4, false},
		{0, 12, 2, "[3 3 3 3]", 12, false},
		{-1, 0, 0, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("N%d_n%d_k%d", tt.nodes, tt.tasks, tt.perNode), func(t *testing.T) {
			plan, n, err := planStep(nodes, tt.nodes, tt.tasks, tt.perNode)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err != nil {
				return
			}
			counts := make([]int, len(plan))
			rank := 0
			for i, p := range plan {
				counts[i] = len(p.tasks)
				if p.node != nodes[i] || p.index != i {
					t.Errorf("node %d = %s (index %d)", i, p.node, p.index)
				}
				for j, task := range p.tasks {
					if int(task.Rank) != rank || int(task.LocalRank) != j {
						t.Errorf("task %d on %s: rank %d local %d, want %d %d", j, p.node, task.Rank, task.LocalRank, rank, j)
					}
					rank++
				}
			}
			if got := fmt.Sprint(counts); got != tt.want || n != tt.ntasks {
				t.Errorf("tasks per node %s (total %d), want %s (%d)", got, n, tt.want, tt.ntasks)
			}
		})
	}
}
