package agent

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

func TestCredentialRules(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root; this test runs as uid", os.Geteuid())
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	strict := &Runner{log: log}
	cases := []struct {
		name string
		r    *Runner
		user string
		want string // "" = allowed
	}{
		{"no owner runs as the agent", strict, "", ""},
		{"root refused", strict, "root", "only with --allow-root-jobs"},
		{"root allowed", &Runner{log: log, allowRoot: true}, "root", ""},
		{"unknown user", strict, "no-such-user-lattice", "is not a user on this node"},
		{"run as self ignores the owner", &Runner{log: log, runAsSelf: true}, "root", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.r.credential(Launch{AllocID: 7, User: c.user})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("credential = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
