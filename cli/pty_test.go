package cli

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// srun --pty outside an allocation takes -p/-t/-A/-J for the allocation it
// creates; without --pty they stay srun's (ignored or refused there).
func TestSrunPtyArgs(t *testing.T) {
	tests := []struct{ in, run, rest []string }{
		{[]string{"--pty", "bash"}, []string{"--pty"}, []string{"bash"}},
		{[]string{"-p", "interactive", "-t30", "--pty", "-N1", "bash", "-l"},
			[]string{"--partition=interactive", "--time=30", "--pty"}, []string{"-N1", "bash", "-l"}},
		{[]string{"--pty", "--account=proj", "-J", "dbg", "--", "bash", "-p"}, []string{"--pty", "--account=proj", "--job-name=dbg"}, []string{"--", "bash", "-p"}},
		{[]string{"-t", "30", "hostname"}, nil, []string{"-t", "30", "hostname"}},
		{[]string{"hostname", "--pty"}, nil, []string{"hostname", "--pty"}},
	}
	for _, tt := range tests {
		run, rest := srunPtyArgs(tt.in)
		if !reflect.DeepEqual(run, tt.run) || !reflect.DeepEqual(rest, tt.rest) {
			t.Errorf("srunPtyArgs(%q) = %q, %q; want %q, %q", tt.in, run, rest, tt.run, tt.rest)
		}
	}
}

// salloc's command keeps its own flags.
func TestAllocArgsKeepTheCommandsFlags(t *testing.T) {
	got := runArgs(allocFlags(), []string{"-N2", "-t", "10", "--ntasks-per-node=4", "bash", "-l"})
	want := []string{"-N", "2", "-t", "10", "--ntasks-per-node=4", "--", "bash", "-l"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("runArgs(alloc) = %q, want %q", got, want)
	}
}

func TestInteractiveUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"attach"},
		{"attach", "x"},
		{"attach", "12.x"},
		{"attach", "12.-1"},
		{"run", "--pty", "-n", "2", "--", "bash"},
		{"alloc", "-n", "-1", "true"},
	} {
		env := OSEnv()
		var stderr bytes.Buffer
		env.Stderr, env.Stdout = &stderr, &bytes.Buffer{}
		env.Getenv = func(string) string { return "" }
		if code := Main(t.Context(), env, args); code != ExitUsage || !strings.Contains(stderr.String(), "invalid") && !strings.Contains(stderr.String(), "usage") {
			t.Errorf("latticectl %s: exit %d, stderr %q; want a usage error", strings.Join(args, " "), code, stderr.String())
		}
	}
}
