package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// Slurm users join short options to their values; every spelling of the
// same request resolves to the same thing.
func TestJoinedShortOptions(t *testing.T) {
	want := map[string]any{"nodes_min": 2.0, "walltime_seconds": 1800.0, "name": "sim", "vcluster": "gpu"}
	spellings := [][]string{
		{"-N2", "-t30", "-Jsim", "-pgpu"},
		{"-N", "2", "-t", "30", "-J", "sim", "-p", "gpu"},
		{"--nodes=2", "--time=30", "--job-name=sim", "--partition=gpu"},
		{"--nodes", "2", "--time", "30", "--job-name", "sim", "--partition", "gpu"},
		{"-N=2", "-t=30", "-J=sim", "-p=gpu"},
	}
	for _, sp := range spellings {
		t.Run(strings.Join(sp, " "), func(t *testing.T) {
			args := append([]string{"submit", "--dry-run", "-ojson"}, sp...)
			r := run(t, nil, append(args, "--", "hostname")...)
			mustCode(t, r, 0)
			var got map[string]any
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestSplitJoined(t *testing.T) {
	flags := (&runner{Env: OSEnv()}).submitCommand().Flags
	tests := []struct {
		in   string
		want []string
	}{
		{"-N1", []string{"-N", "1"}},
		{"-t30", []string{"-t", "30"}},
		{"-pgpu", []string{"-p", "gpu"}},
		{"-Jmy-job", []string{"-J", "my-job"}},
		{"-ojson", []string{"-o", "json"}},
		{"-N", []string{"-N"}},
		{"-name", []string{"-name"}}, // a long flag with one dash
		{"--nodes=1", []string{"--nodes=1"}},
		{"-t=30", []string{"-t=30"}}, // Go's flag package reads it
		{"-x", []string{"-x"}},
		{"12", []string{"12"}},
		{"-", []string{"-"}},
	}
	for _, tt := range tests {
		if got := splitJoined(flags, tt.in); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitJoined(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSuggestions(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts" (did you mean status?)`},
		{[]string{"histroy"}, `did you mean history?`},
		{[]string{"nodes", "drian", "n1"}, `did you mean drain?`},
		{[]string{"status", "--stat", "R"}, `did you mean --state?`},
		{[]string{"submit", "--nodse", "2", "--", "true"}, `did you mean --nodes?`},
		{[]string{"status", "--vclustr", "x"}, `did you mean --vcluster?`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := run(t, servers(deadAddr(t)), tt.args...)
			mustCode(t, r, ExitUsage)
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tt.want)
			}
		})
	}
	// Nothing close: no suggestion, still a usage error.
	r := run(t, nil, "frobnicate")
	mustCode(t, r, ExitUsage)
	if strings.Contains(r.stderr, "did you mean") {
		t.Errorf("no suggestion expected: %q", r.stderr)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"status", "show", "submit", "nodes", "history", "explain"}
	for word, want := range map[string]string{"stauts": "status", "sumbit": "submit", "hist": "history", "nods": "nodes",
		"xyzzy": "", "s": "", "explian": "explain"} {
		if got := suggest(word, cands); got != want {
			t.Errorf("suggest(%q) = %q, want %q", word, got, want)
		}
	}
}
