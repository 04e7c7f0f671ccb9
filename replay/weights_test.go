package replay

import (
	"math"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

func TestNormaliseWeights(t *testing.T) {
	w, note, err := NormaliseWeights(model.Weights{0.6, 0.6})
	if err != nil || math.Abs(w[0]-0.5) > 1e-12 || !strings.Contains(note, "summed to 1.2, not 1: normalised") {
		t.Fatalf("1.2: %v %q %v", w, note, err)
	}
	if _, note, err := NormaliseWeights(model.Weights{0.5, 0.5}); err != nil || note != "" {
		t.Fatalf("1: %q %v", note, err)
	}
	if _, _, err := NormaliseWeights(model.Weights{}); err == nil || !strings.Contains(err.Error(), "sum to 0") {
		t.Fatalf("0: %v", err)
	}
}
