package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// featureLevel reads --feature-level: "" is no pin; else a level from 0
// to the one this build knows.
func featureLevel(v string) (*quorum.Level, error) {
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < int(quorum.LevelBase) || n > int(quorum.FeatureLevel) {
		return nil, fmt.Errorf("--feature-level %q: allowed %d to %d (this build's level), or unset", v, quorum.LevelBase, quorum.FeatureLevel)
	}
	l := quorum.Level(n)
	return &l, nil
}

// secretFlags are the server's flags for secrets: the Raft cluster secret
// (quorum/secret.go) and the environment variables never stored
// (server/secret_env.go).
func secretFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(str("cluster-secret", "", "shared secret every Raft connection must prove (the same on every member, at least 16 bytes: `openssl rand -hex 32`); "+
			"without it and without TLS the Raft address must be loopback")),
		altsrc.NewStringFlag(str("feature-level", "", "pin the feature level this member advertises and proposes at (0 = the release before feature levels; default: all this build knows): "+
			"during a rolling upgrade that may still be rolled back, start upgraded members with the previous release's level, then restart them without it (docs/operations.md, \"Upgrades\")")),
		altsrc.NewStringFlag(str("never-store-env", "", "environment variables (names or patterns such as *_PASSWORD) dropped from every job's environment before it is stored or sent to an agent, comma-separated (LATTICE_TOKEN always is)")),
	}
}

// agentNodeNames lists the nodes a dev agent simulates: its credential is
// bound to exactly those, not to a wildcard.
func agentNodeNames(nodes []model.Node) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}
