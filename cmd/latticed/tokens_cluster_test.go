package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/auth"
)

// TestTokensThroughTheAPI (issue 29): a token an admin creates through the
// API works on every member of a 3-member quorum at once (no file to
// copy), a revoked one is refused by every member within 5 s, a tokens
// file's tokens move into the quorum with `token import`, and an agent
// whose token is refused says so and exits 77.
func TestTokensThroughTheAPI(t *testing.T) {
	skipShort(t)
	c := newCluster(t)
	c.startMembers(3)

	// askEach calls every member about itself only (QuorumStatus answers
	// locally: the member's own view of the tokens decides).
	askEach := func(tok string) []error {
		errs := make([]error, len(c.members))
		for i, m := range c.members {
			conn, err := grpc.NewClient(m.apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerCreds(tok)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			ctx = metadata.AppendToOutgoingContext(ctx, "x-lattice-self-only", "1")
			_, errs[i] = latticev1.NewAdminServiceClient(conn).QuorumStatus(ctx, &latticev1.QuorumStatusRequest{})
			cancel()
			conn.Close()
		}
		return errs
	}
	allOK := func(errs []error) (bool, string) {
		for i, err := range errs {
			if err != nil {
				return false, fmt.Sprintf("%s: %v", c.members[i].id, err)
			}
		}
		return true, ""
	}

	out := ctl(t, c.apiAddrs(), "token", "create", "svc", "--role", "admin", "--note", "ci pipeline")
	tok := firstLineWith(out, auth.TokenPrefix)
	if tok == "" {
		t.Fatalf("token create printed no token:\n%s", out)
	}
	took := c.waitFor(5*time.Second, "every member to accept the new token", func() (bool, string) { return allOK(askEach(tok)) })
	t.Logf("a new token worked on all 3 members %s after it was created", took.Round(time.Millisecond))
	list := ctl(t, c.apiAddrs(), "token", "list")
	if !strings.Contains(list, "svc") || !strings.Contains(list, "ci pipeline") || strings.Contains(list, tok) {
		t.Errorf("token list (no secrets):\n%s", list)
	}
	id := strings.TrimPrefix(auth.HashToken(tok), "sha256:")[:12]

	ctl(t, c.apiAddrs(), "token", "revoke", id)
	took = c.waitFor(5*time.Second, "every member to refuse the revoked token", func() (bool, string) {
		for i, err := range askEach(tok) {
			if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "revoked") {
				return false, fmt.Sprintf("%s: %v", c.members[i].id, err)
			}
		}
		return true, ""
	})
	t.Logf("a revoked token was refused by all 3 members %s after the revocation returned", took.Round(time.Millisecond))

	// Migration: a tokens file's entries (hashes) move into the quorum.
	old := mintToken()
	file := filepath.Join(c.dir, "old-tokens")
	if err := os.WriteFile(file, []byte("# an old tokens file\n"+auth.Entry(old, auth.Identity{User: "legacy", Role: auth.RoleAdmin, MaxPriority: -1})+"\ncn:web user=web role=admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, _ := allOK(askEach(old)); ok {
		t.Fatal("the old token worked before its import")
	}
	out = ctl(t, c.apiAddrs(), "token", "import", file)
	if !strings.Contains(out, "imported 1 token(s), skipped 1") {
		t.Errorf("token import: %s", out)
	}
	c.waitFor(5*time.Second, "every member to accept the imported token", func() (bool, string) { return allOK(askEach(old)) })

	// An agent with a refused token says so and gives up: exit 77.
	logPath := filepath.Join(c.dir, "bad-agent.log")
	p := startProc(t, logPath, "bad-agent", "agent", "--id", "rack9", "--data-dir", filepath.Join(c.dir, "bad-agent"),
		"--simulate", "1", "--server", strings.Join(c.apiAddrs(), ","), "--token", "lat_not-a-token")
	c.track(p)
	if !p.wait(60 * time.Second) {
		t.Fatalf("the refused agent still runs:\n%s", tail(logPath, 20))
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 77 {
		t.Fatalf("refused agent: %v, want exit status 77\n%s", p.err, tail(logPath, 20))
	}
	log := tail(logPath, 50)
	for _, want := range []string{"refused this agent's credential", "agent rack9 with token", "latticectl token create"} {
		if !strings.Contains(log, want) {
			t.Errorf("the refused agent's log lacks %q:\n%s", want, log)
		}
	}
}

func firstLineWith(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
