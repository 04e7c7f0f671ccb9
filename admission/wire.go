package admission

import (
	"fmt"

	"github.com/latticehpc/lattice/model"
)

// Wire is what must be checked on a request's wire form, before any
// conversion.
type Wire struct {
	// WalltimeSeconds as sent: beyond the limit it would wrap around when
	// multiplied into a time.Duration (584 years became one hour).
	WalltimeSeconds int64
	// NodeNames is how many names the node list and the excluded nodes
	// carry together.
	NodeNames int
}

// Check refuses what the wire form cannot carry safely (CodeWire).
func (w Wire) Check() error {
	if w.WalltimeSeconds < 0 || w.WalltimeSeconds > model.MaxWalltimeSecond {
		return refuse(CodeWire, &model.FieldError{Field: "walltime",
			Value: fmt.Sprintf("%d seconds", w.WalltimeSeconds), Allowed: "a duration > 0 and at most 365 days"})
	}
	if w.NodeNames > model.MaxHostlistNodes {
		return refuse(CodeWire, &model.FieldError{Field: "nodelist",
			Value: fmt.Sprintf("%d names", w.NodeNames), Allowed: fmt.Sprintf("at most %d node names", model.MaxHostlistNodes)})
	}
	return nil
}
