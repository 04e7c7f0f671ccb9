package admission

import (
	"fmt"
	"slices"
	"time"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
)

// Walltime checks an update's new walltime in seconds (CodeInvalid, field
// "time") and returns it as a duration.
func Walltime(seconds int64) (time.Duration, error) {
	if seconds <= 0 || seconds > model.MaxWalltimeSecond {
		return 0, refuse(CodeInvalid, &model.FieldError{Field: "time", Value: fmt.Sprintf("%d seconds", seconds), Allowed: "a duration > 0 and at most 365 days"})
	}
	return time.Duration(seconds) * time.Second, nil
}

// RaisePriority refuses (CodeDenied) an update that sets priority class
// above the caller's QOS ceiling when that raises any of the allocations.
func (c *Chain) RaisePriority(id *auth.Identity, class int, allocs []*model.Allocation) error {
	if c.AuthOn && class > id.PriorityCeiling() && slices.ContainsFunc(allocs, func(a *model.Allocation) bool { return class > a.PriorityClass }) {
		return refusef(CodeDenied, "permission denied: %s may not raise priority class to %d: their QOS ceiling is %d",
			id, class, id.PriorityCeiling())
	}
	return nil
}

// NothingToUpdate is the refusal of an update that changes nothing.
func NothingToUpdate() error {
	return refusef(CodeNoChange, "nothing to update: give --time, --nodes, --priority-class, --qos, --vcluster, --name or --begin")
}
