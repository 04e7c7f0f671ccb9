package main

import (
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/latticehpc/lattice/model"
)

// secretFlags are the server's flags for secrets: the Raft cluster secret
// (quorum/secret.go) and the environment variables never stored
// (server/secret_env.go).
func secretFlags() []cli.Flag {
	return []cli.Flag{
		altsrc.NewStringFlag(str("cluster-secret", "", "shared secret every Raft connection must prove (the same on every member, at least 16 bytes: `openssl rand -hex 32`); "+
			"without it and without TLS the Raft address must be loopback")),
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
