package quorum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// PatchVCluster changes the named settings of one existing vCluster and
// nothing else: Set maps a field's JSON name in model.VCluster to its new
// value. (SetVCluster replaces the whole definition: a member that does not
// know a field would drop it. A patch names only what changes, and a
// member handed a field it does not know stops instead of dropping it.)
//
// The leader validates the resulting vCluster before proposing; Apply
// checks only what depends on the state at apply time (the vCluster
// exists; a power cap is not below what it draws now).
type PatchVCluster struct {
	Header
	Name string                     `json:"name"`
	Set  map[string]json.RawMessage `json:"set"`
}

// vclusterFieldSince is the feature level that introduced each field of
// model.VCluster (by JSON name). A new field of model.VCluster is added
// here with the level of its release (TestVClusterFieldsHaveALevel fails
// otherwise), and a patch or a creation setting it is proposed only once
// every member knows that level.
var vclusterFieldSince = map[string]Level{
	"name": LevelBase, "type": LevelBase, "weights_profile": LevelBase, "weights": LevelBase,
	"cycle_interval": LevelBase, "min_interval": LevelBase, "reservation_depth": LevelBase,
	"allow_lending": LevelBase, "allow_borrowing": LevelBase, "power_cap_watts": LevelBase,
	"algorithm": LevelBase, "max_lend_fraction": LevelBase, "reclaim_grace": LevelBase,
	"reclaim_backoff": LevelBase, "preemption": LevelBase, "preempt_horizon": LevelBase,
	"checkpointable_only_on_borrowed": LevelBase, "fair_share": LevelBase,
	"service_protect": LevelBase, "running_ends": LevelBase, "predicted_starts": LevelBase,
	"preempt_mode": Level1,
}

// VClusterChanges returns the patch that turns from into to: the JSON
// value of every field that differs (the name never changes).
func VClusterChanges(from, to model.VCluster) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	fv, tv := reflect.ValueOf(from), reflect.ValueOf(to)
	for i := range fv.NumField() {
		f := fv.Type().Field(i)
		name := jsonName(f)
		if name == "" || name == "name" || reflect.DeepEqual(fv.Field(i).Interface(), tv.Field(i).Interface()) {
			continue
		}
		b, err := json.Marshal(tv.Field(i).Interface())
		if err != nil {
			return nil, fmt.Errorf("vcluster field %s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// VClusterLevel is the feature level a member needs to keep every field
// that v sets (to create it with SetVCluster).
func VClusterLevel(v model.VCluster) Level {
	b, err := json.Marshal(v)
	if err != nil {
		return FeatureLevel + 1
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return FeatureLevel + 1
	}
	return fieldsLevel(fields)
}

// Level is the feature level a member needs to apply the patch: that of
// the command and of every field it sets.
func (c *PatchVCluster) Level() Level { return max(LevelOf(CmdPatchVCluster), fieldsLevel(c.Set)) }

// Level is the feature level a member needs to keep every field the
// definition sets.
func (c *SetVCluster) Level() Level { return VClusterLevel(c.VCluster) }

func fieldsLevel(fields map[string]json.RawMessage) Level {
	l := LevelBase
	for name := range fields {
		fl, ok := vclusterFieldSince[name]
		if !ok {
			return FeatureLevel + 1
		}
		l = max(l, fl)
	}
	return l
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name
}

// UnmarshalJSON refuses a field this build does not know: applying the
// rest would silently drop it (the leader gates fields on every member's
// level, so this happens only to a member started on a newer log).
func (c *PatchVCluster) UnmarshalJSON(b []byte) error {
	type plain PatchVCluster
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Set)) {
		if _, ok := vclusterFieldSince[name]; !ok || name == "name" {
			return fmt.Errorf("vcluster field %q is not known to this latticed (feature level %d): written by a newer one; upgrade this member", name, FeatureLevel)
		}
	}
	return nil
}

// patched returns v with the patch's fields set.
func (c *PatchVCluster) patched(v model.VCluster) (model.VCluster, error) {
	var obj bytes.Buffer
	obj.WriteByte('{')
	for i, name := range slices.Sorted(maps.Keys(c.Set)) {
		if i > 0 {
			obj.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		obj.Write(k)
		obj.WriteByte(':')
		obj.Write(c.Set[name])
	}
	obj.WriteByte('}')
	name := v.Name
	// Fields absent from the object keep their value; a pointer field set
	// to null becomes nil.
	if err := json.Unmarshal(obj.Bytes(), &v); err != nil {
		return v, err
	}
	v.Name = name
	return v, nil
}

func (s *State) applyPatchVCluster(c *PatchVCluster) *Result {
	old := s.vclusters[c.Name]
	if old == nil {
		return &Result{Rejection: reject(CodeNotFound, "", "vcluster %q does not exist; known: %s", c.Name, s.vclusterNames())}
	}
	v, err := c.patched(*old)
	if err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "vcluster %s: %v", c.Name, err)}
	}
	if v.PowerCapWatts > 0 && v.PowerCapWatts != old.PowerCapWatts && s.idx.vclusterDraw[v.Name] > v.PowerCapWatts {
		return &Result{Rejection: reject(CodePower, model.ReasonPowerBudget,
			"vcluster %s draws an estimated %d W now, above the requested cap %d W", v.Name, s.idx.vclusterDraw[v.Name], v.PowerCapWatts)}
	}
	s.vclusters[v.Name] = &v
	s.touch()
	return &Result{}
}
