package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Singleton holds an allocation until no other allocation of the same name
// and tenant runs, and it is the first such singleton in line (Slurm's
// --dependency=singleton; "mutex" in DAG files). It names no ids.
const Singleton DependencyCondition = "singleton"

// dependencyConditions are the canonical condition names, as stored.
var dependencyConditions = []DependencyCondition{AfterOK, AfterAny, AfterNotOK, AfterStart, AfterCorr, Singleton}

// conditionAliases are the names of the DAG file format (and of the
// reference design) for the same conditions.
var conditionAliases = map[string]DependencyCondition{
	"success":       AfterOK,
	"failure":       AfterNotOK,
	"any":           AfterAny,
	"corresponding": AfterCorr,
	"mutex":         Singleton,
}

// ConditionNames lists every accepted condition spelling, canonical first.
func ConditionNames() string {
	return joinStates(dependencyConditions) + " (or success, failure, any, corresponding, mutex)"
}

// ParseDependencyCondition accepts a condition name in any letter case,
// canonical (afterok, afterany, afternotok, after, aftercorr, singleton) or
// its DAG alias (success, any, failure, corresponding, mutex), and returns
// the canonical one.
func ParseDependencyCondition(s string) (DependencyCondition, error) {
	in := strings.ToLower(strings.TrimSpace(s))
	c := DependencyCondition(in)
	if slices.Contains(dependencyConditions, c) {
		return c, nil
	}
	if c, ok := conditionAliases[in]; ok {
		return c, nil
	}
	return "", fieldErr("depends-on", s, ConditionNames())
}

// MaxDependencyIDs bounds the ids one request may name. Depending on an
// array's id waits for all its tasks, however many.
const MaxDependencyIDs = 1000

// TaskResolver maps array task ARRAYID_INDEX to the task's allocation id.
type TaskResolver func(arrayID uint64, index int) (uint64, error)

const dependencyForms = "CONDITION:ID[:ID...] joined by ',' (all must hold) or by '?' (any one suffices), or singleton; " +
	"CONDITION one of afterok, afterany, afternotok, after, aftercorr; ID an allocation or array id (an array id means every task) or an array task ARRAYID_INDEX"

// ParseDependencies reads Slurm's dependency list: "afterok:12:13,afterany:14"
// means all of them, "afterok:12?afternotok:13" any one of them (any is then
// true), "singleton" one running allocation of this name at a time. An id
// that starts an array stands for every task of it; ARRAYID_INDEX names one
// task and is turned into its allocation id by task (nil: refused, the
// caller cannot ask). Those come back in a Dependency with Task set.
func ParseDependencies(s string, task TaskResolver) (deps []Dependency, any bool, err error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return nil, false, nil
	}
	bad := func(v string) error { return fieldErr("depends-on", v, dependencyForms) }
	if strings.Contains(in, ",") && strings.Contains(in, "?") {
		return nil, false, fieldErr("depends-on", s, "either ',' (all of) or '?' (any of) between conditions, not both (as in Slurm)")
	}
	sep := ","
	if strings.Contains(in, "?") {
		sep, any = "?", true
	}
	n := 0
	for _, part := range strings.Split(in, sep) {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, false, bad(s)
		}
		fields := strings.Split(part, ":")
		cond, err := ParseDependencyCondition(fields[0])
		if err != nil {
			return nil, false, bad(part)
		}
		if cond == Singleton {
			if len(fields) > 1 {
				return nil, false, fieldErr("depends-on", part, "singleton without ids (it holds this allocation while another of its name and tenant runs)")
			}
			deps = append(deps, Dependency{Condition: Singleton})
			continue
		}
		if len(fields) < 2 {
			return nil, false, bad(part)
		}
		plain := Dependency{Condition: cond}
		tasks := Dependency{Condition: cond, Task: true}
		for _, f := range fields[1:] {
			f = strings.TrimSpace(f)
			if base, idx, ok := strings.Cut(f, "_"); ok {
				arr, err := strconv.ParseUint(base, 10, 64)
				i, okIdx := atoiNonNeg(idx)
				if err != nil || arr == 0 || !okIdx {
					return nil, false, bad(part)
				}
				if task == nil {
					return nil, false, fieldErr("depends-on", f, "plain allocation or array ids here (an array task id such as 12_3 is resolved by the server)")
				}
				id, err := task(arr, i)
				if err != nil {
					return nil, false, err
				}
				tasks.IDs = append(tasks.IDs, id)
				continue
			}
			id, err := strconv.ParseUint(f, 10, 64)
			if err != nil || id == 0 {
				return nil, false, bad(part)
			}
			plain.IDs = append(plain.IDs, id)
		}
		n += len(plain.IDs) + len(tasks.IDs)
		if len(plain.IDs) > 0 {
			deps = append(deps, plain)
		}
		if len(tasks.IDs) > 0 {
			deps = append(deps, tasks)
		}
	}
	if n > MaxDependencyIDs {
		return nil, false, fieldErr("depends-on", fmt.Sprintf("%d ids", n),
			fmt.Sprintf("at most %d ids (an array id waits for all its tasks)", MaxDependencyIDs))
	}
	return deps, any, nil
}

// FormatDependencies writes dependencies back in Slurm's grammar.
func FormatDependencies(deps []Dependency, any bool) string {
	parts := make([]string, 0, len(deps))
	for _, d := range deps {
		var b strings.Builder
		b.WriteString(string(d.Condition))
		for _, id := range d.IDs {
			b.WriteByte(':')
			b.WriteString(strconv.FormatUint(id, 10))
		}
		parts = append(parts, b.String())
	}
	if any {
		return strings.Join(parts, "?")
	}
	return strings.Join(parts, ",")
}

// normalizeDependencies replaces condition aliases by their canonical
// names, copying DependsOn only when one is found (it may be shared).
func (r *Request) normalizeDependencies() {
	for i, d := range r.DependsOn {
		if c, err := ParseDependencyCondition(string(d.Condition)); err != nil || c == d.Condition {
			continue
		}
		r.DependsOn = slices.Clone(r.DependsOn)
		for j := i; j < len(r.DependsOn); j++ {
			if c, err := ParseDependencyCondition(string(r.DependsOn[j].Condition)); err == nil {
				r.DependsOn[j].Condition = c
			}
		}
		return
	}
}

// validateDependencies checks DependsOn (canonical conditions, as
// ApplyDefaults leaves them).
func (r *Request) validateDependencies() error {
	n := 0
	for _, d := range r.DependsOn {
		if !slices.Contains(dependencyConditions, d.Condition) {
			return fieldErr("depends-on", string(d.Condition), ConditionNames())
		}
		if d.Condition == Singleton {
			if len(d.IDs) > 0 {
				return fieldErr("depends-on", FormatDependencies([]Dependency{d}, false), "singleton without ids")
			}
			if r.Name == "" {
				return fieldErr("depends-on", "singleton", "singleton with a name (--name/-J): it keeps one allocation of that name per tenant running")
			}
			continue
		}
		if len(d.IDs) == 0 {
			return fieldErr("depends-on", string(d.Condition), dependencyForms)
		}
		if slices.Contains(d.IDs, 0) {
			return fieldErr("depends-on", FormatDependencies([]Dependency{d}, false), "allocation ids >= 1")
		}
		n += len(d.IDs)
	}
	if n > MaxDependencyIDs {
		return fieldErr("depends-on", fmt.Sprintf("%d ids", n), fmt.Sprintf("at most %d ids (an array id waits for all its tasks)", MaxDependencyIDs))
	}
	return nil
}

// HasSingleton reports whether the request waits as a singleton.
func (r *Request) HasSingleton() bool {
	for _, d := range r.DependsOn {
		if d.Condition == Singleton {
			return true
		}
	}
	return false
}

// DefaultMaxArraySize is the default of a cluster's max_array_size: as
// Slurm's MaxArraySize, every array index must be below it, so an array
// has at most that many tasks.
const DefaultMaxArraySize = 10001

// ReasonArrayTaskLimit is why an array task waits while %MAX of its array
// run (Slurm's JobArrayTaskLimit).
const ReasonArrayTaskLimit = "JobArrayTaskLimit"

// Count is the number of tasks of the array.
func (a ArraySpec) Count() int {
	if a.Step < 1 || a.End < a.Start {
		return 0
	}
	return (a.End-a.Start)/a.Step + 1
}

// Position is where task index sits in the array (0 for Start), and
// whether the array has that index at all.
func (a ArraySpec) Position(index int) (int, bool) {
	if a.Step < 1 || index < a.Start || index > a.End || (index-a.Start)%a.Step != 0 {
		return 0, false
	}
	return (index - a.Start) / a.Step, true
}

func (a ArraySpec) String() string {
	s := strconv.Itoa(a.Start)
	if a.End != a.Start {
		s += "-" + strconv.Itoa(a.End)
	}
	if a.Step > 1 {
		s += ":" + strconv.Itoa(a.Step)
	}
	if a.MaxConcurrent > 0 {
		s += "%" + strconv.Itoa(a.MaxConcurrent)
	}
	return s
}

// CheckArraySize refuses an array with an index at or above maxArraySize
// (a cluster's max_array_size; <= 0 means DefaultMaxArraySize).
func CheckArraySize(a *ArraySpec, maxArraySize int) error {
	if a == nil {
		return nil
	}
	if maxArraySize <= 0 {
		maxArraySize = DefaultMaxArraySize
	}
	if a.End >= maxArraySize || a.Count() > maxArraySize {
		return fieldErr("array", a.String(), fmt.Sprintf("indexes 0..%d: this cluster's max_array_size is %d", maxArraySize-1, maxArraySize))
	}
	return nil
}
