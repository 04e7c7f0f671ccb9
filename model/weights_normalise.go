package model

import (
	"fmt"
	"math"
	"strings"
)

// Normalised makes weights set or overridden one by one sum to 1, as every
// profile's do (a score is then a weighted mean of factors in [0, 1]):
// weights summing to 1.2 are divided by 1.2 (every score is scaled alike,
// so no decision changes), and note says so with the weights in force (""
// when they summed to 1). Weights summing to 0 are refused. `vcluster set`
// and the replay's --weight overrides share it.
func (w Weights) Normalised() (Weights, string, error) {
	sum := 0.0
	for _, v := range w {
		sum += v
	}
	if sum <= 0 {
		return w, "", fmt.Errorf("the weights sum to 0: allowed weights f1..f9 in [0, 1] of which at least one is above 0")
	}
	if math.Abs(sum-1) < 1e-9 {
		return w, "", nil
	}
	var parts []string
	for i := range w {
		w[i] /= sum
		if w[i] != 0 {
			parts = append(parts, fmt.Sprintf("f%d=%.4g", i+1, w[i]))
		}
	}
	return w, fmt.Sprintf("the weights summed to %.4g, not 1: normalised (each divided by %.4g) to %s", sum, sum, strings.Join(parts, " ")), nil
}
