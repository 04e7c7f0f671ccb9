package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

func TestFindSupervisor(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "sup")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findSupervisor(exe); err != nil || got != exe {
		t.Errorf("configured executable: %q, %v; want %q", got, err, exe)
	}
	for _, bad := range []string{plain, filepath.Join(dir, "missing"), dir} {
		if _, err := findSupervisor(bad); err == nil || !strings.Contains(err.Error(), "not an executable file") {
			t.Errorf("findSupervisor(%q): %v, want an error naming it not an executable file", bad, err)
		}
	}
	// Nothing configured and none next to the test binary: latticed
	// itself (here the test binary, whose init supervises) is used.
	if got, err := findSupervisor(""); err != nil || got != "" {
		t.Errorf("nothing configured: %q, %v; want \"\" (this executable)", got, err)
	}
}

// An end is written to the state file at once only when a restarted agent
// could not read the same from the status file (statusTells false).
func TestStatusTells(t *testing.T) {
	dir := t.TempDir()
	zero, seven := filepath.Join(dir, "zero"), filepath.Join(dir, "seven")
	if err := os.WriteFile(zero, []byte("0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seven, []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := func(state, reason string, code int32, msg string) *latticev1.AllocationReport {
		return &latticev1.AllocationReport{State: state, Reason: reason, HasExitCode: true, ExitCode: code, Message: msg}
	}
	for _, tc := range []struct {
		name   string
		status string
		r      *latticev1.AllocationReport
		want   bool
	}{
		{"completed, status 0", zero, rep("COMPLETED", "", 0, ""), true},
		{"failed with its code", seven, rep("FAILED", model.ReasonNonZeroExit, 7, ""), true},
		{"code differs from the file", zero, rep("FAILED", model.ReasonNonZeroExit, 7, ""), false},
		{"no status file", "", rep("COMPLETED", "", 0, ""), false},
		{"status file missing", filepath.Join(dir, "missing"), rep("COMPLETED", "", 0, ""), false},
		{"cancelled by the agent", seven, rep("CANCELLED", model.ReasonCancelled, 7, ""), false},
		{"walltime", seven, rep("FAILED", model.ReasonWalltimeExceeded, 7, ""), false},
		{"checkpointed", zero, rep("SUSPENDED", model.ReasonCheckpointed, 0, ""), false},
		{"with a message", seven, rep("FAILED", model.ReasonNonZeroExit, 7, "exited with code 7 while asked to checkpoint"), false},
		{"no exit code", zero, &latticev1.AllocationReport{State: "COMPLETED"}, false},
	} {
		if got := statusTells(tc.status, tc.r); got != tc.want {
			t.Errorf("%s: statusTells = %v, want %v", tc.name, got, tc.want)
		}
	}
}
