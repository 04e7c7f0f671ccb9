package server

import (
	"github.com/latticehpc/lattice/leader"
)

// DefaultNodeTimeout and DefaultMassSilenceFraction are latticed's
// --node-timeout and --mass-silence-fraction (package leader's rule).
const (
	DefaultNodeTimeout         = leader.DefaultNodeTimeout
	DefaultMassSilenceFraction = leader.DefaultMassSilenceFraction
)
