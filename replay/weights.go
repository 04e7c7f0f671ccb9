package replay

import (
	"fmt"

	"github.com/latticehpc/lattice/model"
)

// NormaliseWeights makes weights overridden one by one (--weight, sweeps)
// sum to 1, as every profile's do and as `vcluster set` does: weights
// summing to 1.2 are divided by 1.2 (every score is scaled alike, so no
// decision changes), and note says so ("" when they summed to 1). Weights
// summing to 0 are refused.
func NormaliseWeights(w model.Weights) (model.Weights, string, error) {
	w, note, err := w.Normalised()
	if err != nil {
		return w, "", fmt.Errorf("replay: %w", err)
	}
	return w, note, nil
}
