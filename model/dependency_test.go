package model

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// tasks resolves ARRAYID_INDEX as 1000*ARRAYID+INDEX, and refuses array 9.
func tasks(arr uint64, i int) (uint64, error) {
	if arr == 9 {
		return 0, errors.New("allocation 9_" + fmt.Sprint(i) + " not found")
	}
	return arr*1000 + uint64(i), nil
}

func TestParseDependencies(t *testing.T) {
	cases := []struct {
		in   string
		want []Dependency
		any  bool
	}{
		{"", nil, false},
		{"afterok:12:13,afterany:14", []Dependency{{AfterOK, []uint64{12, 13}, false}, {AfterAny, []uint64{14}, false}}, false},
		{"afterok:1?afterany:2", []Dependency{{AfterOK, []uint64{1}, false}, {AfterAny, []uint64{2}, false}}, true},
		{"singleton", []Dependency{{Singleton, nil, false}}, false},
		{"SINGLETON,afterok:3", []Dependency{{Singleton, nil, false}, {AfterOK, []uint64{3}, false}}, false},
		{"aftercorr:7", []Dependency{{AfterCorr, []uint64{7}, false}}, false},
		{"after:5", []Dependency{{AfterStart, []uint64{5}, false}}, false},
		{"afternotok:4_2:6", []Dependency{{AfterNotOK, []uint64{6}, false}, {AfterNotOK, []uint64{4002}, true}}, false},
		{"success:1,failure:2,any:3,corresponding:4,mutex", []Dependency{
			{AfterOK, []uint64{1}, false}, {AfterNotOK, []uint64{2}, false}, {AfterAny, []uint64{3}, false},
			{AfterCorr, []uint64{4}, false}, {Singleton, nil, false}}, false},
	}
	for _, tc := range cases {
		got, any, err := ParseDependencies(tc.in, tasks)
		if err != nil || !reflect.DeepEqual(got, tc.want) || any != tc.any {
			t.Errorf("ParseDependencies(%q) = %+v, %v, %v; want %+v, %v", tc.in, got, any, err, tc.want, tc.any)
		}
	}
	bad := map[string]string{
		"afterok":                        "CONDITION:ID",
		"afterok:x":                      "CONDITION:ID",
		"whenever:12":                    "afterok, afterany",
		"12":                             "CONDITION:ID",
		"afterok:0":                      "CONDITION:ID",
		"afterok:1,afterany:2?afterok:3": "not both",
		"afterok:1,,afterok:2":           "CONDITION:ID",
		"singleton:4":                    "without ids",
		"afterok:1_x":                    "CONDITION:ID",
		"afterok:9_1":                    "9_1 not found",
		"afterok:12+30":                  "CONDITION:ID",
	}
	for in, want := range bad {
		_, _, err := ParseDependencies(in, tasks)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDependencies(%q) = %v, want an error with %q", in, err, want)
		}
	}
	if _, _, err := ParseDependencies("afterok:3_1", nil); err == nil || !IsFieldError(err) || !strings.Contains(err.Error(), "resolved by the server") {
		t.Errorf("a task id without a resolver: %v", err)
	}
	long := "afterok" + strings.Repeat(":5", MaxDependencyIDs+1)
	if _, _, err := ParseDependencies(long, nil); err == nil || !strings.Contains(err.Error(), "at most 1000 ids") {
		t.Errorf("too many ids: %v", err)
	}
}

func TestFormatDependenciesRoundTrip(t *testing.T) {
	for _, in := range []string{"afterok:12:13,afterany:14", "afterok:1?afternotok:2", "singleton", "aftercorr:3,singleton"} {
		deps, any, err := ParseDependencies(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatDependencies(deps, any); got != in {
			t.Errorf("FormatDependencies(ParseDependencies(%q)) = %q", in, got)
		}
	}
}

func TestRequestDependencies(t *testing.T) {
	base := func() Request {
		return Request{Name: "x", Command: []string{"true"}, NodesMin: 1}
	}
	r := base()
	shared := []Dependency{{Condition: "success", IDs: []uint64{4}}, {Condition: "Mutex"}}
	r.DependsOn = shared
	r.ApplyDefaults()
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.DependsOn[0].Condition != AfterOK || r.DependsOn[1].Condition != Singleton || !r.HasSingleton() {
		t.Errorf("aliases not normalised: %+v", r.DependsOn)
	}
	if shared[0].Condition != "success" {
		t.Error("ApplyDefaults wrote into the caller's slice")
	}
	for name, mut := range map[string]func(r *Request){
		"unknown condition":  func(r *Request) { r.DependsOn = []Dependency{{Condition: "later", IDs: []uint64{1}}} },
		"no ids":             func(r *Request) { r.DependsOn = []Dependency{{Condition: AfterOK}} },
		"zero id":            func(r *Request) { r.DependsOn = []Dependency{{Condition: AfterOK, IDs: []uint64{0}}} },
		"singleton with ids": func(r *Request) { r.DependsOn = []Dependency{{Condition: Singleton, IDs: []uint64{1}}} },
		"singleton unnamed":  func(r *Request) { r.Name = ""; r.DependsOn = []Dependency{{Condition: Singleton}} },
		"too many ids":       func(r *Request) { r.DependsOn = []Dependency{{Condition: AfterOK, IDs: make([]uint64, 1001)}} },
	} {
		r := base()
		mut(&r)
		r.ApplyDefaults()
		if err := r.Validate(); err == nil || !IsFieldError(err) || !strings.Contains(err.Error(), "depends-on") {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
}

func TestArraySpecArithmetic(t *testing.T) {
	a := ArraySpec{Start: 3, End: 21, Step: 3, MaxConcurrent: 4}
	if a.Count() != 7 || a.String() != "3-21:3%4" {
		t.Fatalf("Count %d String %s", a.Count(), a)
	}
	for pos, idx := range a.Indexes() {
		if p, ok := a.Position(idx); !ok || p != pos {
			t.Errorf("Position(%d) = %d, %v; want %d", idx, p, ok, pos)
		}
	}
	for _, idx := range []int{0, 2, 4, 22, 24, -3} {
		if _, ok := a.Position(idx); ok {
			t.Errorf("Position(%d) found", idx)
		}
	}
	if err := CheckArraySize(&ArraySpec{Start: 0, End: 10000, Step: 1}, 0); err != nil {
		t.Errorf("10,001 tasks refused by default: %v", err)
	}
	err := CheckArraySize(&ArraySpec{Start: 0, End: 10001, Step: 1}, 0)
	if err == nil || !strings.Contains(err.Error(), "max_array_size is 10001") {
		t.Errorf("index 10001 accepted by default: %v", err)
	}
	if err := CheckArraySize(&ArraySpec{Start: 0, End: 99, Step: 1}, 50); err == nil {
		t.Error("index 99 accepted with max_array_size 50")
	}
}

// FuzzParseDependencies: any input gives dependencies that validate, or a
// *FieldError naming depends-on; nothing panics. Seeds are in
// testdata/fuzz/FuzzParseDependencies and below.
func FuzzParseDependencies(f *testing.F) {
	for _, s := range []string{"afterok:12:13,afterany:14", "afterok:1?afterany:2", "singleton", "aftercorr:4_3", "afterok:", ":::", "afterok:1,afterok:2?x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		deps, any, err := ParseDependencies(s, tasks)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) && !strings.Contains(err.Error(), "not found") {
				t.Fatalf("ParseDependencies(%q): %v is not a field error", s, err)
			}
			if fe != nil && fe.Field != "depends-on" {
				t.Fatalf("ParseDependencies(%q): field %q", s, fe.Field)
			}
			return
		}
		r := Request{Name: "x", Command: []string{"true"}, NodesMin: 1, DependsOn: deps, DependencyAny: any}
		r.ApplyDefaults()
		if err := r.Validate(); err != nil {
			t.Fatalf("ParseDependencies(%q) = %+v, which does not validate: %v", s, deps, err)
		}
		again, any2, err := ParseDependencies(FormatDependencies(deps, any), nil)
		if err != nil || any2 != any || len(again) > len(deps) {
			t.Fatalf("round trip of %q: %+v %v %v", s, again, any2, err)
		}
	})
}
