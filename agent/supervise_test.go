package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
