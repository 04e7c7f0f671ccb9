package solver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// DefaultProfile is the weights profile used when none is set or the one set
// is unknown: the seed's "balanced HPC" baseline, with topology's (f4)
// weight moved to fair share (f3): measured on the replay traces (issue 15,
// docs/solver.md), f4's bias towards small jobs cost Jain's index, max
// wait and bounded slowdown, and the node choice keeps jobs in the fewest
// groups whatever f4's weight. Other profiles keep f4.
const DefaultProfile = "balanced"

// profiles is the seed's weight table (w1..w9) plus the balanced default,
// in the order ProfileNames lists them. It is never modified.
var profiles = [...]struct {
	name string
	w    model.Weights
}{
	{DefaultProfile, model.Weights{0.20, 0.20, 0.35, 0.00, 0.10, 0.05, 0.00, 0.00, 0.10}},
	{string(model.TypeHPCBatch), model.Weights{0.15, 0.20, 0.20, 0.15, 0.10, 0.05, 0.00, 0.05, 0.10}},
	{string(model.TypeMLTraining), model.Weights{0.10, 0.10, 0.10, 0.25, 0.15, 0.05, 0.05, 0.10, 0.10}},
	{string(model.TypeService), model.Weights{0.15, 0.05, 0.10, 0.05, 0.10, 0.05, 0.10, 0.10, 0.30}},
	{string(model.TypeSensitive), model.Weights{0.90, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.10}},
	{string(model.TypeInteractive), model.Weights{0.10, 0.30, 0.10, 0.00, 0.05, 0.15, 0.00, 0.00, 0.30}},
}

// ProfileNames lists the known weights profiles, the default first.
func ProfileNames() []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = p.name
	}
	return out
}

// Profile returns the weights of a named profile (names are matched
// without regard to letter case or surrounding spaces).
func Profile(name string) (model.Weights, bool) {
	name = strings.ToLower(strings.TrimSpace(name))
	for _, p := range profiles {
		if p.name == name {
			return p.w, true
		}
	}
	return model.Weights{}, false
}

// ResolveProfile returns the weights of name and the profile actually used.
// An empty name means the default; an unknown one falls back to the default
// and returns a warning to show the user.
func ResolveProfile(name string) (w model.Weights, resolved string, warning string) {
	if strings.TrimSpace(name) == "" {
		w, _ = Profile(DefaultProfile)
		return w, DefaultProfile, ""
	}
	if w, ok := Profile(name); ok {
		return w, strings.ToLower(strings.TrimSpace(name)), ""
	}
	w, _ = Profile(DefaultProfile)
	return w, DefaultProfile, fmt.Sprintf("unknown weights profile %q, using %q (known: %s)",
		name, DefaultProfile, strings.Join(ProfileNames(), ", "))
}

// ProfileForType is the profile a vCluster of type t uses unless told
// otherwise: the profile named after its type, or the default for an
// unknown type.
func ProfileForType(t model.VClusterType) string {
	if _, ok := Profile(string(t)); ok && t != "" {
		return strings.ToLower(string(t))
	}
	return DefaultProfile
}

// ParseWeightOverride reads one weight override such as "f3=0.3". The
// factor may be named f1..f9, w1..w9 or by its title ("fair_share=0.3");
// the value must be a number in [0,1]. It returns the factor's index
// (0 = f1) and the value.
func ParseWeightOverride(s string) (index int, value float64, err error) {
	bad := func() (int, float64, error) {
		return 0, 0, &model.FieldError{Field: "weight", Value: s,
			Allowed: "FACTOR=VALUE with FACTOR f1..f9 (or " + factorTitles() + ") and VALUE between 0 and 1"}
	}
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return bad()
	}
	k = strings.ToLower(strings.TrimSpace(k))
	index = -1
	if len(k) == 2 && (k[0] == 'f' || k[0] == 'w') && k[1] >= '1' && k[1] <= '9' {
		index = int(k[1] - '1')
	} else {
		for i, f := range Factors {
			if k == f.Title {
				index = i
			}
		}
	}
	if index < 0 {
		return bad()
	}
	value, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if perr != nil || !(value >= 0 && value <= 1) {
		return bad()
	}
	return index, value, nil
}

// ApplyWeightOverrides returns w with every override ("f3=0.3", ...) applied
// in order; the first bad one is returned as an error and w is unchanged.
func ApplyWeightOverrides(w model.Weights, overrides []string) (model.Weights, error) {
	out := w
	for _, o := range overrides {
		i, v, err := ParseWeightOverride(o)
		if err != nil {
			return w, err
		}
		out[i] = v
	}
	return out, nil
}

func factorTitles() string {
	t := make([]string, len(Factors))
	for i, f := range Factors {
		t[i] = f.Title
	}
	return strings.Join(t, ", ")
}
