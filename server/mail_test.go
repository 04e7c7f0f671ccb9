package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// TestMailHook: with --mail-hook, the leader runs it for the events a job
// asked for; without one, a submission asking for mail is warned.
func TestMailHook(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "mail.log")
	d := startDevWith(t, dir, 4, []string{"hpc-batch"}, func(c *Config) {
		c.MailHook = `echo "$LATTICE_MAIL_EVENT $LATTICE_ALLOC_ID $LATTICE_MAIL_USER $LATTICE_ALLOC_STATE" >> ` + log
	})
	ok := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}, MailType: "BEGIN,END", MailUser: "a@example.org"})
	bad := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"exit 1"}, MailType: "fail"})
	quiet := d.submit(t, &latticev1.AllocationRequest{NodesMin: 1, Command: []string{"true"}})
	d.waitState(t, ok, model.StateCompleted)
	d.waitState(t, bad, model.StateFailed)
	d.waitState(t, quiet, model.StateCompleted)
	want := []string{"BEGIN " + ok + " a@example.org RUNNING", "END " + ok + " a@example.org COMPLETED", "FAIL " + bad + "  FAILED"}
	waitFor(t, 10*time.Second, "mail hook runs", func() bool {
		b, _ := os.ReadFile(log)
		for _, w := range want {
			if !strings.Contains(string(b), w+"\n") {
				return false
			}
		}
		return true
	})
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), " "+quiet+" ") || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("mail log:\n%s", b)
	}
	resp, err := d.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, MailType: "END"}})
	if err != nil || len(resp.Warnings) != 0 {
		t.Fatalf("with a hook: %v %v", resp.GetWarnings(), err)
	}

	d2 := startDevWith(t, t.TempDir(), 2, []string{"hpc-batch"}, nil)
	resp, err = d2.allocs.Submit(context.Background(), &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{NodesMin: 1, WalltimeSeconds: 60, Command: []string{"true"}, MailType: "END"}})
	if err != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "no mail hook") {
		t.Fatalf("without a hook: %v %v", resp.GetWarnings(), err)
	}
}
