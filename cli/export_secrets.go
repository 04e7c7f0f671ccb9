package cli

// ownCredentials are the environment variables that carry latticectl's own
// credentials: --export never passes them to a job, in any form (ALL, a
// name, NAME=VALUE), so they never reach the Raft log, backups or an
// agent. A job that calls latticectl has the agent's LATTICE_CACERT and
// reads the user's saved token (TokenPath) like any other command.
var ownCredentials = map[string]bool{
	"LATTICE_TOKEN":        true,
	"LATTICE_CACERT":       true,
	"LATTICE_CERT":         true,
	"LATTICE_KEY":          true,
	"LATTICE_MUNGE_SOCKET": true,
	"MUNGE_SOCKET":         true,
}
