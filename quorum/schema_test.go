package quorum

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/latticehpc/lattice/model"
)

// Every row of the schema decodes what it encodes, under its own type and
// name, and every command type has one row.
func TestSchemaRoundTripsEveryCommand(t *testing.T) {
	names := map[string]CommandType{}
	for typ, spec := range commandTable {
		if spec.name == "" || spec.apply == nil || (spec.new == nil) == (spec.decode == nil) {
			t.Fatalf("command %d: incomplete row %+v", typ, spec)
		}
		if prev, dup := names[spec.name]; dup {
			t.Fatalf("commands %d and %d are both named %q", prev, typ, spec.name)
		}
		names[spec.name] = typ
		var c Command
		switch typ {
		case CmdAssignBatch:
			c = &AssignBatch{VCluster: "batch"}
		case CmdUpdateAllocs:
			c = &UpdateAllocs{}
		default:
			c = spec.new()
		}
		if c.Type() != typ {
			t.Fatalf("row %d (%s) makes a %T of type %d", typ, spec.name, c, c.Type())
		}
		c.CommandHeader().Time = t0
		data, err := Encode(c)
		if err != nil {
			t.Fatalf("%s: %v", spec.name, err)
		}
		back, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", spec.name, err)
		}
		if back.Type() != typ || typ.String() != spec.name || !typ.Known() {
			t.Fatalf("%s: decoded as %s", spec.name, back.Type())
		}
		if spec.since > FeatureLevel {
			t.Fatalf("%s: level %d above this build's %d", spec.name, spec.since, FeatureLevel)
		}
	}
}

func TestDecodeOfAnUnknownTypeSaysItIsNewer(t *testing.T) {
	_, err := Decode([]byte{250, '{', '}'})
	if err == nil || !strings.Contains(err.Error(), "newer latticed") {
		t.Fatalf("err = %v, want it to say a newer latticed wrote it", err)
	}
	if LevelOf(250) <= FeatureLevel {
		t.Fatalf("an unknown type must need a level above this build's")
	}
}

// A new field of model.VCluster must be given the level of its release,
// or a patch of it could reach a member that drops it.
func TestVClusterFieldsHaveALevel(t *testing.T) {
	typ := reflect.TypeOf(model.VCluster{})
	for i := range typ.NumField() {
		name := jsonName(typ.Field(i))
		if name == "" {
			continue
		}
		if _, ok := vclusterFieldSince[name]; !ok {
			t.Errorf("model.VCluster field %s (json %q) has no level in vclusterFieldSince", typ.Field(i).Name, name)
		}
	}
}

// The probe: `vcluster set --reservation-depth 2` reset
// running_ends and predicted_starts, because the whole vCluster was
// replicated by a member that did not know them. A patch names only the
// field it changes: every other field is kept, whoever proposes it.
func TestPatchVClusterChangesOnlyItsFields(t *testing.T) {
	f := newFixture(t)
	no := false
	before := *f.s.VCluster("batch")
	before.RunningEnds, before.PredictedStarts, before.PowerCapWatts = model.RunningEndsWalltime, &no, 5000
	f.ok(&SetVCluster{VCluster: before})

	after := before
	after.ReservationDepth = 2
	set, err := VClusterChanges(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 1 || string(set["reservation_depth"]) != "2" {
		t.Fatalf("changes = %v, want reservation_depth only", set)
	}
	f.ok(&PatchVCluster{Name: "batch", Set: set})
	got := *f.s.VCluster("batch")
	if !reflect.DeepEqual(got, after) {
		t.Fatalf("after the patch:\n got %+v\nwant %+v", got, after)
	}

	// What the old protocol did: the whole vCluster as a member that knew
	// neither field saw it. It resets them; the patch above did not.
	var old map[string]json.RawMessage
	b, _ := json.Marshal(after)
	_ = json.Unmarshal(b, &old)
	delete(old, "running_ends")
	delete(old, "predicted_starts")
	b, _ = json.Marshal(old)
	var dropped model.VCluster
	_ = json.Unmarshal(b, &dropped)
	f.ok(&SetVCluster{VCluster: dropped})
	if v := f.s.VCluster("batch"); v.RunningEnds != "" || v.PredictedStarts != nil {
		t.Fatalf("control: the whole-object command kept the fields (%+v); the test shows nothing", v)
	}

	// Zero values and nil pointers are changes too.
	f.ok(&SetVCluster{VCluster: after})
	zero := after
	zero.PowerCapWatts, zero.PredictedStarts = 0, nil
	set, _ = VClusterChanges(after, zero)
	f.ok(&PatchVCluster{Name: "batch", Set: set})
	if v := *f.s.VCluster("batch"); !reflect.DeepEqual(v, zero) {
		t.Fatalf("zeroing patch: got %+v, want %+v", v, zero)
	}
	if r := f.apply(&PatchVCluster{Name: "nope", Set: set}); r.Rejection == nil || r.Rejection.Code != CodeNotFound {
		t.Fatalf("patch of a missing vcluster: %+v", r.Rejection)
	}
}

// A member handed a field it does not know stops rather than drop it.
func TestPatchVClusterRefusesAFieldItDoesNotKnow(t *testing.T) {
	c := &PatchVCluster{Name: "batch", Set: map[string]json.RawMessage{"reservation_depth": json.RawMessage("2"), "fancy_new_knob": json.RawMessage("true")}}
	c.Time = t0
	data, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(data); err == nil || !strings.Contains(err.Error(), `"fancy_new_knob"`) {
		t.Fatalf("decode = %v, want a refusal naming the field", err)
	}
	if c.Level() <= FeatureLevel {
		t.Fatalf("a patch of an unknown field needs level %d, want above %d", c.Level(), FeatureLevel)
	}
	if (&PatchVCluster{Set: map[string]json.RawMessage{"reservation_depth": nil}}).Level() != Level1 {
		t.Fatal("a patch of a base field needs the patch command's level (1)")
	}
}

func TestLevelErrorNamesTheMemberAndTheLevel(t *testing.T) {
	members := []MemberLevel{{ID: "s1", Level: 1, Build: "latticed abc"}, {ID: "s2", Level: 0}}
	err := checkLevels(Level1, "patch_vcluster", members)
	var le *LevelError
	if !errors.As(err, &le) || le.Member.ID != "s2" {
		t.Fatalf("err = %v, want a LevelError for s2", err)
	}
	for _, want := range []string{"patch_vcluster", "feature level 1", "member s2", "level 0", "before feature levels", "upgrade it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if err := checkLevels(Level1, "x", members[:1]); err != nil {
		t.Fatalf("every member at level 1: %v", err)
	}
	err = checkLevels(Level1, "x", []MemberLevel{{ID: "s3", Err: errors.New("connection refused")}})
	if err == nil || !strings.Contains(err.Error(), "s3 did not say its level") {
		t.Fatalf("an unreachable member: %v", err)
	}
}
