package model

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateLevel0 = flag.Bool("update-level0", false, "rewrite testdata/level0_rules.json from the current Level0 functions (never after they shipped)")

// level0Case is one input and what level 0's rules made of it.
type level0Case struct {
	Kind  string          `json:"kind"` // request, vcluster, tenant, qos
	In    json.RawMessage `json:"in"`
	Out   json.RawMessage `json:"out,omitempty"` // the request after ApplyDefaultsLevel0
	Error string          `json:"error,omitempty"`
}

// level0Inputs spans the rules: valid requests and one breaking each rule.
var level0Inputs = []struct{ kind, in string }{
	{"request", `{"command":["true"],"nodes_min":1}`},
	{"request", `{"name":"a","command":["x"],"nodes_min":2,"nodes_max":4,"walltime":60000000000,"tenant":"t1","vcluster":"batch","constraints":["b","a&c"," a "],"depends_on":[{"condition":"afterok","ids":[3,1,3]}]}`},
	{"request", `{"script":"#!/bin/sh\n","nodes_min":1,"array":{"start":0,"end":9,"step":1,"max_concurrent":2},"checkpoint":"webhook"}`},
	{"request", `{"command":["x"],"nodes_min":0}`},
	{"request", `{"command":["x"],"nodes_min":3,"nodes_max":2}`},
	{"request", `{"nodes_min":1}`},
	{"request", `{"command":["x"],"script":"y","nodes_min":1}`},
	{"request", `{"name":"` + strings.Repeat("n", 201) + `","command":["x"],"nodes_min":1}`},
	{"request", `{"name":"` + strings.Repeat("n", 200) + `","command":["x"],"nodes_min":1}`},
	{"request", `{"tenant":"bad name","command":["x"],"nodes_min":1}`},
	{"request", `{"command":["x"],"nodes_min":1,"walltime":-1}`},
	{"request", `{"command":["x"],"nodes_min":1,"walltime":31622400000000000}`},
	{"request", `{"command":["x"],"nodes_min":1,"priority_class":11}`},
	{"request", `{"command":["x"],"nodes_min":1,"gpus_per_node":-1}`},
	{"request", `{"command":["x"],"nodes_min":1,"env":["NOEQUALS"]}`},
	{"request", `{"command":["x"],"nodes_min":1,"node_list":["n 1"]}`},
	{"request", `{"command":["x"],"nodes_min":3,"node_list":["n1","n2"],"exclude_nodes":["n2"]}`},
	{"request", `{"command":["x"],"nodes_min":1,"qos":"no good"}`},
	{"request", `{"command":["x"],"nodes_min":1,"array":{"start":5,"end":1,"step":1}}`},
	{"request", `{"command":["x"],"nodes_min":1,"hot_data_fraction":1.5}`},
	{"request", `{"command":["x"],"nodes_min":1,"checkpoint_minutes":-2}`},
	{"request", `{"command":["x"],"nodes_min":1,"mail_user":"` + strings.Repeat("m", 300) + `"}`},
	{"request", `{"interactive":true,"nodes_min":1,"ntasks":4,"nodes_max":0}`},
	{"vcluster", `{"name":"batch","type":"hpc-batch","reservation_depth":1,"cycle_interval":1000000000}`},
	{"vcluster", `{"name":"bad name","type":"hpc-batch"}`},
	{"vcluster", `{"name":"v","type":"nonsense"}`},
	{"vcluster", `{"name":"v","type":"hpc-batch","max_lend_fraction":2}`},
	{"vcluster", `{"name":"v","type":"hpc-batch","reservation_depth":-1}`},
	{"tenant", `{"name":"t1","max_nodes":4}`},
	{"tenant", `{"name":"","max_nodes":4}`},
	{"tenant", `{"name":"t","max_nodes":-1}`},
	{"qos", `{"name":"normal","priority_class":5}`},
	{"qos", `{"name":"` + strings.Repeat("q", 65) + `"}`},
	{"qos", `{"name":"q","priority_class":99}`},
}

func level0Verdict(t *testing.T, kind string, in json.RawMessage) level0Case {
	c := level0Case{Kind: kind, In: in}
	var err error
	switch kind {
	case "request":
		var r Request
		if e := json.Unmarshal(in, &r); e != nil {
			t.Fatal(e)
		}
		r.ApplyDefaultsLevel0()
		err = r.ValidateLevel0()
		c.Out, _ = json.Marshal(r)
	case "vcluster":
		var v VCluster
		if e := json.Unmarshal(in, &v); e != nil {
			t.Fatal(e)
		}
		err = v.ValidateLevel0()
	case "tenant":
		var v Tenant
		if e := json.Unmarshal(in, &v); e != nil {
			t.Fatal(e)
		}
		err = v.ValidateLevel0()
	case "qos":
		var v QOS
		if e := json.Unmarshal(in, &v); e != nil {
			t.Fatal(e)
		}
		err = v.ValidateLevel0()
	}
	if err != nil {
		c.Error = err.Error()
	}
	return c
}

// The rules the Raft log's entries of level 0 are applied with never
// change: a release that changes a rule or a default changes Validate or
// ApplyDefaults (checked before a proposal), not the Level0 functions, or
// an upgraded member would apply an old entry differently from the members
// that applied it first. The verdicts were recorded when level 0 was
// frozen (release 38e3d33's rules).
func TestLevel0RulesAreFrozen(t *testing.T) {
	path := filepath.Join("testdata", "level0_rules.json")
	if *updateLevel0 {
		var out []level0Case
		for _, in := range level0Inputs {
			out = append(out, level0Verdict(t, in.kind, json.RawMessage(in.in)))
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []level0Case
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 30 {
		t.Fatalf("only %d recorded cases", len(want))
	}
	for _, w := range want {
		got := level0Verdict(t, w.Kind, w.In)
		if got.Error != w.Error || (w.Out != nil && compact(got.Out) != compact(w.Out)) {
			t.Errorf("level 0's rules changed for %s %s:\n got error %q out %s\nwant error %q out %s\n(change Validate/ApplyDefaults instead)", w.Kind, w.In, got.Error, got.Out, w.Error, w.Out)
		}
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}
