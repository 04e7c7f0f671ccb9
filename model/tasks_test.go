package model

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseMemoryMB(t *testing.T) {
	for in, want := range map[string]int64{"4000": 4000, "500M": 500, "16G": 16384, "16gb": 16384, "1T": 1 << 20, "1536K": 2, "0": 0} {
		if got, err := ParseMemoryMB("mem", in); err != nil || got != want {
			t.Errorf("ParseMemoryMB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "4X", "1.5G", "99999999999999T"} {
		if _, err := ParseMemoryMB("mem", in); err == nil || !strings.Contains(err.Error(), "mem") {
			t.Errorf("ParseMemoryMB(%q) = %v, want an error naming mem", in, err)
		}
	}
}

func TestTasksPerNodeAndCompressCounts(t *testing.T) {
	for _, tt := range []struct {
		nodes, ntasks, perNode int
		want                   string
	}{
		{2, 0, 4, "4(x2)"}, {2, 8, 0, "4(x2)"}, {2, 3, 0, "2,1"}, {4, 8, 2, "2(x4)"}, {3, 5, 2, "2(x2),1"},
		{2, 0, 0, "1(x2)"}, {1, 4, 0, "4"}, {3, 7, 0, "3,2(x2)"},
	} {
		if got := CompressCounts(TasksPerNode(tt.nodes, tt.ntasks, tt.perNode)); got != tt.want {
			t.Errorf("N%d n%d k%d: %s, want %s", tt.nodes, tt.ntasks, tt.perNode, got, tt.want)
		}
	}
}

func TestTaskNodesAndFit(t *testing.T) {
	r := Request{Ntasks: 8}
	if n := r.TaskNodes(2); n != 4 {
		t.Errorf("-n8 on 2-CPU nodes: %d nodes, want 4", n)
	}
	r.CPUsPerTask = 2
	if n := r.TaskNodes(4); n != 4 {
		t.Errorf("-n8 -c2 on 4-CPU nodes: %d nodes, want 4", n)
	}
	if n := (&Request{Ntasks: 8, NtasksPerNode: 3}).TaskNodes(64); n != 3 {
		t.Errorf("-n8 --ntasks-per-node=3: %d nodes, want 3", n)
	}
	fit := Request{NodesMin: 2, NtasksPerNode: 4}
	if why := fit.TaskFit(2, 0); !strings.Contains(why, "need 4 CPUs") {
		t.Errorf("4 tasks on 2-CPU nodes fit: %q", why)
	}
	fit.Overcommit = true
	if why := fit.TaskFit(2, 0); why != "" {
		t.Errorf("-O: %q", why)
	}
	if why := fit.TaskFit(0, 0); why != "" {
		t.Errorf("unknown CPUs judged: %q", why)
	}
	g := Request{NodesMin: 1, NtasksPerNode: 2, GPUsPerTask: 2}
	if why := g.TaskFit(64, 2); !strings.Contains(why, "GPUs") {
		t.Errorf("2 tasks × 2 GPUs on 2-GPU nodes fit: %q", why)
	}
}

func TestValidateTasks(t *testing.T) {
	base := Request{Tenant: "t", Command: []string{"x"}, NodesMin: 2, NodesMax: 2, Walltime: DefaultWalltime, Checkpoint: CheckpointNone}
	for name, tt := range map[string]struct {
		edit  func(*Request)
		field string
	}{
		"negative ntasks":      {func(r *Request) { r.Ntasks = -1 }, "ntasks"},
		"fewer tasks":          {func(r *Request) { r.Ntasks = 1 }, "ntasks"},
		"more than per node":   {func(r *Request) { r.Ntasks, r.NtasksPerNode = 5, 2 }, "ntasks"},
		"mem and mem-per-cpu":  {func(r *Request) { r.MemPerNodeMB, r.MemPerCPUMB = 1, 1 }, "mem"},
		"negative cpus":        {func(r *Request) { r.CPUsPerTask = -2 }, "cpus-per-task"},
		"too many gpus a task": {func(r *Request) { r.GPUsPerTask = 1000 }, "gpus-per-task"},
	} {
		r := base
		tt.edit(&r)
		err := r.Validate()
		var fe *FieldError
		if err == nil || !asFieldError(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: %v, want an error on %s", name, err, tt.field)
		}
	}
	ok := base
	ok.Ntasks, ok.NtasksPerNode, ok.CPUsPerTask, ok.MemPerNodeMB = 8, 4, 2, 1024
	if err := ok.Validate(); err != nil {
		t.Errorf("valid tasks: %v", err)
	}
	sized := base
	sized.NodesMin, sized.NodesMax, sized.Ntasks = 1, 0, 8 // -n8 without -N: the server sizes it
	if err := sized.Validate(); err != nil {
		t.Errorf("-n8 without -N: %v", err)
	}
}

func asFieldError(err error, fe **FieldError) bool {
	f, ok := err.(*FieldError)
	*fe = f
	return ok
}

func TestMultiProg(t *testing.T) {
	lines, err := ParseMultiProg("# comment\n0 ./master --id %t\n1-2,4 'worker x' %o\n* echo rest %t\n")
	if err != nil {
		t.Fatal(err)
	}
	for rank, want := range map[int][]string{0: {"./master", "--id", "0"}, 1: {"worker x", "0"}, 2: {"worker x", "1"},
		4: {"worker x", "2"}, 3: {"echo", "rest", "3"}} {
		if got := ArgvFor(lines, rank); !reflect.DeepEqual(got, want) {
			t.Errorf("rank %d: %q, want %q", rank, got, want)
		}
	}
	only, _ := ParseMultiProg("0-1 a\n")
	if ArgvFor(only, 2) != nil {
		t.Error("rank 2 found a program no line names")
	}
	for _, bad := range []string{"", "# only\n", "x prog\n", "3-1 prog\n", "0\n", "0 'open\n"} {
		if _, err := ParseMultiProg(bad); err == nil {
			t.Errorf("ParseMultiProg(%q) accepted", bad)
		}
	}
}
