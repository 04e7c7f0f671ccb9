package server

import (
	"path"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// Secrets stay out of the log. A job's environment is proposed to the
// quorum (stored in the Raft log, snapshots and backups) and forwarded to
// agents; a site names, with Config.NeverStoreEnv (latticed server
// --never-store-env), the variables that must never be: they are dropped
// from submissions, workflow stages and step launches before anything is
// proposed or sent. LATTICE_TOKEN, a latticectl credential, is always
// dropped (latticectl itself never exports its credentials either).

// AlwaysNeverStoreEnv are dropped whatever the site's list.
var AlwaysNeverStoreEnv = []string{"LATTICE_TOKEN"}

// neverStoreEnv returns the names and patterns (path.Match, e.g.
// "*_PASSWORD") dropped on this member.
func (c *Config) neverStoreEnv() []string {
	return append(append([]string(nil), AlwaysNeverStoreEnv...), c.NeverStoreEnv...)
}

// dropSecretEnv returns env (KEY=VALUE entries) without the variables the
// site never stores; env itself when nothing is dropped.
func (s *Server) dropSecretEnv(env []string) []string {
	if len(env) == 0 {
		return env
	}
	patterns := s.cfg.neverStoreEnv()
	secret := func(e string) bool {
		k, _, _ := strings.Cut(e, "=")
		for _, p := range patterns {
			if ok, _ := path.Match(p, k); ok {
				return true
			}
		}
		return false
	}
	for i, e := range env {
		if secret(e) {
			out := append([]string(nil), env[:i]...)
			for _, e := range env[i+1:] {
				if !secret(e) {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return env
}

// checkNeverStoreEnv checks the site's patterns at start.
func checkNeverStoreEnv(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			return &model.FieldError{Field: "never-store-env", Value: p, Allowed: "variable names or patterns such as *_PASSWORD (path.Match)"}
		}
	}
	return nil
}
