package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRealBatchScripts submits, dry, the batch scripts in
// testdata/scripts/ (modelled on HPC centres' published examples; origins
// in its README) and checks how each one resolves. Every script there
// needs an entry: a new one cannot be added without saying what it means.
func TestRealBatchScripts(t *testing.T) {
	gpus := func(typ string, n float64) map[string]any { return map[string]any{"gpu_type": typ, "gpus_per_node": n} }
	expect := map[string]struct {
		want map[string]any
		// siteQOS: the script names a QOS the CLI does not know; with no
		// server to ask, it is kept as written with a warning.
		siteQOS bool
	}{
		"nersc-perlmutter-cpu.sh": {siteQOS: true, want: map[string]any{"name": "mpi-cpu", "tenant": "m1234", "nodes_min": 2.0, "nodes_max": 2.0,
			"walltime_seconds": 1800.0, "constraints": []any{"cpu"}}},
		"nersc-perlmutter-gpu-debug.sh": {want: map[string]any{"tenant": "m1234_g", "nodes_min": 1.0, "walltime_seconds": 600.0,
			"constraints": []any{"gpu"}, "gpus": gpus("", 4)}},
		"olcf-frontier-debug.sh": {want: map[string]any{"name": "solver", "tenant": "ABC123", "vcluster": "batch", "nodes_min": 2.0,
			"walltime_seconds": 900.0, "constraints": []any{"nvme"}, "output": "%x-%j.out"}},
		"lumi-g-mpi.sh": {want: map[string]any{"name": "examplejob", "tenant": "project_465000000", "vcluster": "standard-g",
			"nodes_min": 16.0, "nodes_max": 16.0, "walltime_seconds": 129600.0, "gpus": gpus("", 8),
			"output": "examplejob.o%j", "error": "examplejob.e%j"}},
		"lumi-c-hybrid.sh": {want: map[string]any{"name": "hybrid", "vcluster": "standard", "nodes_min": 2.0, "walltime_seconds": 7200.0,
			"output": "hybrid.o%j", "error": "hybrid.e%j"}},
		"csc-puhti-serial.sh": {want: map[string]any{"name": "example", "tenant": "project_2001234", "vcluster": "small",
			"nodes_min": 1.0, "walltime_seconds": 7200.0}},
		"csc-puhti-gpu.sh": {want: map[string]any{"name": "train", "vcluster": "gpu", "walltime_seconds": 7200.0, "gpus": gpus("v100", 4)}},
		"tacc-frontera-mpi.sh": {want: map[string]any{"name": "myjob", "tenant": "myproject", "vcluster": "normal", "nodes_min": 4.0,
			"walltime_seconds": 5400.0, "output": "myjob.o%j", "error": "myjob.e%j"}},
		"alliance-array.sh": {want: map[string]any{"tenant": "def-someuser", "walltime_seconds": 900.0, "output": "array-%A_%a.out",
			"array": map[string]any{"start": 1.0, "end": 10.0, "step": 1.0, "max_concurrent": 0.0}}},
		"alliance-gpu.sh": {want: map[string]any{"name": "pytorch", "tenant": "def-someuser", "walltime_seconds": 10800.0, "gpus": gpus("v100", 2)}},
		"cscs-daint-gpu.sh": {want: map[string]any{"name": "cosmo", "tenant": "s1234", "vcluster": "normal", "nodes_min": 4.0,
			"walltime_seconds": 3600.0, "constraints": []any{"gpu"}}},
		"jsc-juwels-booster.sh": {want: map[string]any{"tenant": "training2300", "vcluster": "booster", "nodes_min": 2.0,
			"walltime_seconds": 900.0, "gpus": gpus("", 4), "output": "mpi-out.%j", "error": "mpi-err.%j"}},
		"princeton-multithread.sh": {want: map[string]any{"name": "multithread", "nodes_min": 1.0, "walltime_seconds": 900.0}},
		"dependency-chain.sh": {want: map[string]any{"name": "post", "nodes_min": 1.0, "walltime_seconds": 1800.0,
			"depends_on": []any{map[string]any{"condition": "afterok", "ids": []any{152.0, 153.0}}}}},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "scripts", "*.sh"))
	if err != nil || len(files) < 12 {
		t.Fatalf("%d scripts (%v); want at least a dozen", len(files), err)
	}
	readme, _ := os.ReadFile(filepath.Join("testdata", "scripts", "README.md"))
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			e, ok := expect[name]
			if !ok {
				t.Fatalf("no expectations for %s", name)
			}
			if !strings.Contains(string(readme), "`"+name+"`") {
				t.Errorf("testdata/scripts/README.md does not say where %s comes from", name)
			}
			r := run(t, nil, "submit", "--dry-run", "-o", "json", path)
			mustCode(t, r, 0)
			if e.siteQOS && !strings.Contains(r.stdout, "is not a built-in name and no server answered") {
				t.Errorf("a site QOS name without a server: no warning in %s", r.stdout)
			}
			if strings.Contains(r.stderr, "latticectl:") {
				t.Errorf("an error on stderr: %s", r.stderr)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			for k, want := range e.want {
				if m, ok := want.(map[string]any); ok && k == "gpus" {
					for gk, gv := range m {
						if got[gk] != gv {
							t.Errorf("%s = %#v, want %#v", gk, got[gk], gv)
						}
					}
					continue
				}
				if !reflect.DeepEqual(got[k], want) {
					t.Errorf("%s = %#v, want %#v", k, got[k], want)
				}
			}
			if got["entrypoint"] != path {
				t.Errorf("entrypoint %v, want the script %s", got["entrypoint"], path)
			}
		})
	}
}
