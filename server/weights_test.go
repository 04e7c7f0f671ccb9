package server

import (
	"math"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// Weights set one by one are normalised to sum 1, and the answer says so;
// weights summing to 0 are refused.
func TestNormaliseWeights(t *testing.T) {
	w := model.Weights{0.20, 0.20, 0.55, 0, 0.10, 0.05, 0, 0, 0.10} // 1.2
	got, note, err := normaliseWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, v := range got {
		sum += v
	}
	if math.Abs(sum-1) > 1e-12 || math.Abs(got[2]-0.55/1.2) > 1e-12 {
		t.Errorf("normalised to %v (sum %v)", got, sum)
	}
	if !strings.Contains(note, "summed to 1.2, not 1: normalised") || !strings.Contains(note, "f3=0.4583") {
		t.Errorf("note %q", note)
	}
	if _, note, _ := normaliseWeights(model.Weights{0.5, 0.5}); note != "" {
		t.Errorf("weights summing to 1 changed: %q", note)
	}
	if _, _, err := normaliseWeights(model.Weights{}); err == nil || !strings.Contains(err.Error(), "sum to 0") {
		t.Errorf("zero weights: %v", err)
	}
}
