package dag

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/latticehpc/lattice/model"
)

// Status is a submitted workflow as the quorum reports it.
type Status struct {
	ID     uint64
	Name   string
	State  model.DAGState
	Stages []StageStatus // in submission (topological) order
}

// StageStatus is one stage: for an array, the state of its tasks together.
type StageStatus struct {
	Name      string
	ID        uint64
	DisplayID string
	Tasks     int // array tasks; 0 = not an array
	State     model.AllocState
	Reason    string
	Detail    string
	DependsOn []model.DAGDependency
}

// ArrayState is the state of an array's tasks together: RUNNING while one
// is active; PENDING while one waits; then FAILED if one failed, CANCELLED
// if one was cancelled, else COMPLETED.
func ArrayState(states []model.AllocState) model.AllocState {
	var active, waiting, failed, cancelled bool
	for _, s := range states {
		switch {
		case s.Active():
			active = true
		case s == model.StatePending || s == model.StateSuspended:
			waiting = true
		case s == model.StateFailed:
			failed = true
		case s == model.StateCancelled:
			cancelled = true
		}
	}
	switch {
	case active:
		return model.StateRunning
	case waiting:
		return model.StatePending
	case failed:
		return model.StateFailed
	case cancelled:
		return model.StateCancelled
	case len(states) == 0:
		return model.StateCancelled // every task pruned: ended long ago
	}
	return model.StateCompleted
}

// State is the workflow's state from its stages' (model.DAGState):
// RUNNING while any stage is pending or active; then FAILED if a stage
// failed, CANCELLED if one was cancelled other than for a condition that
// could never hold, COMPLETED otherwise. A stage skipped because its
// condition could not hold (an afternotok handler after a success) was not
// needed; one skipped because a stage it needed failed leaves that failure
// to speak for the DAG.
func State(stages []StageStatus) model.DAGState {
	var failed, cancelled bool
	for _, s := range stages {
		switch {
		case !s.State.Terminal():
			return model.DAGRunning
		case s.State == model.StateFailed:
			failed = true
		case s.State == model.StateCancelled && s.Reason != model.ReasonDependencyNeverSatisfied:
			cancelled = true
		}
	}
	switch {
	case failed:
		return model.DAGFailed
	case cancelled:
		return model.DAGCancelled
	}
	return model.DAGCompleted
}

// Counts says how many stages are in each group, for one-line summaries.
func (s *Status) Counts() (done, running, pending, skipped int) {
	for _, st := range s.Stages {
		switch {
		case st.State == model.StateCompleted:
			done++
		case st.State.Active():
			running++
		case !st.State.Terminal():
			pending++
		case st.State == model.StateCancelled && st.Reason == model.ReasonDependencyNeverSatisfied:
			skipped++
		default:
			done++
		}
	}
	return
}

// WriteText draws the workflow as a tree from its first stages: each stage
// under the stage it depends on, with its condition; a stage with several
// parents is drawn under the first and referred to ("see above") under the
// others. wide adds reason details.
func WriteText(w io.Writer, s *Status, wide bool) error {
	done, running, pending, skipped := s.Counts()
	fmt.Fprintf(w, "DAG %d %s: %s (%d stages: %d ended, %d running, %d pending, %d skipped)\n",
		s.ID, s.Name, s.State, len(s.Stages), done, running, pending, skipped)
	index := make(map[string]int, len(s.Stages))
	for i, st := range s.Stages {
		index[st.Name] = i
	}
	type edge struct {
		child int
		cond  model.DependencyCondition
	}
	children := make([][]edge, len(s.Stages))
	hasParent := make([]bool, len(s.Stages))
	for i, st := range s.Stages {
		for _, d := range st.DependsOn {
			if p, ok := index[d.Name]; ok && d.Condition != model.Singleton {
				children[p] = append(children[p], edge{i, d.Condition})
				hasParent[i] = true
			}
		}
	}
	type row struct{ left, right string }
	var rows []row
	drawn := make([]bool, len(s.Stages))
	var draw func(i int, prefix, branch string, cond model.DependencyCondition)
	draw = func(i int, prefix, branch string, cond model.DependencyCondition) {
		st := s.Stages[i]
		label := prefix + branch + st.Name
		if cond != "" {
			label += " (" + string(cond) + ")"
		}
		if drawn[i] {
			rows = append(rows, row{label, "↑ see above"})
			return
		}
		drawn[i] = true
		right := fmt.Sprintf("%-6s %s", st.DisplayID, st.State)
		if st.Tasks > 0 {
			right += fmt.Sprintf(" [array of %d]", st.Tasks)
		}
		if singleton(st) {
			right += " [mutex]"
		}
		if st.Reason != "" && !st.State.Active() && st.State != model.StateCompleted {
			right += " " + st.Reason
		}
		if wide && st.Detail != "" {
			right += ": " + st.Detail
		}
		rows = append(rows, row{label, right})
		next := prefix
		switch branch {
		case "├── ":
			next += "│   "
		case "└── ":
			next += "    "
		}
		for k, c := range children[i] {
			b := "├── "
			if k == len(children[i])-1 {
				b = "└── "
			}
			draw(c.child, next, b, c.cond)
		}
	}
	for i := range s.Stages {
		if !hasParent[i] {
			draw(i, "", "", "")
		}
	}
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r.left))
	}
	for _, r := range rows {
		pad := strings.Repeat(" ", width-utf8.RuneCountInString(r.left)+2)
		if _, err := fmt.Fprintln(w, r.left+pad+r.right); err != nil {
			return err
		}
	}
	return nil
}

func singleton(st StageStatus) bool {
	for _, d := range st.DependsOn {
		if d.Condition == model.Singleton {
			return true
		}
	}
	return false
}

// stateColors are the Graphviz fill colours of stage states.
var stateColors = map[model.AllocState]string{
	model.StatePending:       "#eeeeee",
	model.StateStaging:       "#bbdefb",
	model.StateRunning:       "#90caf9",
	model.StateCheckpointing: "#90caf9",
	model.StateSuspended:     "#fff59d",
	model.StateCompleted:     "#a5d6a7",
	model.StateFailed:        "#ef9a9a",
	model.StateCancelled:     "#d7ccc8",
}

// WriteDOT writes the workflow as a Graphviz digraph: one box per stage,
// filled by state, one edge per dependency labelled with its condition
// (failure edges dashed).
func WriteDOT(w io.Writer, s *Status) error {
	fmt.Fprintf(w, "digraph %s {\n", dotQuote(fmt.Sprintf("DAG %d %s", s.ID, s.Name)))
	fmt.Fprintf(w, "  label=%s;\n  labelloc=t;\n  rankdir=LR;\n", dotQuote(fmt.Sprintf("%s (%d): %s", s.Name, s.ID, s.State)))
	fmt.Fprintln(w, `  node [shape=box, style="rounded,filled", fontname="Helvetica"];`)
	fmt.Fprintln(w, `  edge [fontname="Helvetica", fontsize=10];`)
	for _, st := range s.Stages {
		label := fmt.Sprintf("%s\n%s %s", st.Name, st.DisplayID, st.State)
		if st.Tasks > 0 {
			label += fmt.Sprintf("\narray of %d", st.Tasks)
		}
		if st.Reason != "" && !st.State.Active() && st.State != model.StateCompleted {
			label += "\n" + st.Reason
		}
		extra := ""
		if singleton(st) {
			extra = ", peripheries=2"
		}
		fmt.Fprintf(w, "  %s [label=%s, fillcolor=%s%s];\n", dotQuote(st.Name), dotQuote(label), dotQuote(stateColors[st.State]), extra)
	}
	for _, st := range s.Stages {
		for _, d := range st.DependsOn {
			if d.Condition == model.Singleton {
				continue
			}
			style := ""
			if d.Condition == model.AfterNotOK {
				style = ", style=dashed"
			}
			fmt.Fprintf(w, "  %s -> %s [label=%s%s];\n", dotQuote(d.Name), dotQuote(st.Name), dotQuote(string(d.Condition)), style)
		}
	}
	_, err := fmt.Fprintln(w, "}")
	return err
}

// dotQuote quotes a Graphviz ID.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
