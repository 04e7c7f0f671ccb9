package dag

import (
	"strings"
	"testing"
	"time"
)

// A workflow file's services: keys read into a spec; unknown keys, a
// missing entrypoint and bad values are errors at their line.
func TestParseServices(t *testing.T) {
	f, err := Parse([]byte(`dag_id: d
services:
  - name: hub
    min_nodes: 1
    max_nodes: 3
    scale_metric: load
    scale_target: 2.5
    scale_cooldown: 10s
    drain_time: 0s
    entrypoint: [serve, --port, "1"]
allocations:
  - name: a
    entrypoint: "true"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Services) != 1 {
		t.Fatalf("services %+v", f.Services)
	}
	sp := f.Services[0]
	if sp.Name != "hub" || sp.MaxNodes != 3 || sp.Target != 2.5 || sp.Cooldown != 10*time.Second || sp.DrainTime >= 0 || len(sp.Command) != 3 {
		t.Errorf("spec %+v", sp)
	}
	for _, c := range []struct{ file, want string }{
		{"services:\n  - name: x\n    min_nodes: 1\n    colour: red\n    entrypoint: [a]\n", "line 5: unknown key \"colour\" in the service at line 3"},
		{"services:\n  - name: x\n    min_nodes: 1\n", "needs an entrypoint"},
		{"services:\n  - name: x\n    min_nodes: lots\n    entrypoint: [a]\n", "invalid min_nodes"},
		{"services:\n  - name: x\n    min_nodes: 1\n    drain_time: soon\n    entrypoint: [a]\n", "invalid drain_time"},
	} {
		if _, err := Parse([]byte("dag_id: d\n" + c.file + "allocations:\n  - name: a\n    entrypoint: \"true\"\n")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
}
