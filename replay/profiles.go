package replay

import (
	"fmt"
	"strings"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/solver"
)

// ProfileWeights returns the weights of a solver profile; "" is the solver's
// default (balanced) profile. Unlike a production vCluster, which warns and
// falls back, a replay refuses an unknown name: a typo would silently replay
// the wrong weights.
func ProfileWeights(name string) (model.Weights, error) {
	if strings.TrimSpace(name) == "" {
		name = solver.DefaultProfile
	}
	if w, ok := solver.Profile(name); ok {
		return w, nil
	}
	return model.Weights{}, fmt.Errorf("weights profile %q: allowed %s", name, strings.Join(solver.ProfileNames(), ", "))
}
