// Package cli is latticectl: its commands, output formats, exit codes and
// the translation of Slurm batch scripts (#SBATCH lines) into Lattice
// requests.
//
// It owns everything a user types or reads on the command line, following
// the contract in CLI.md: data on stdout, messages on stderr, -o
// table|json|yaml|wide with stable JSON shapes, and exit codes 0 ok, 1
// error, 2 usage or invalid input, 3 not found, 75 temporarily unavailable
// (no leader, no server answered; retry). Slurm habits carry over: joined
// short options (-N1), Slurm state codes (PD, R, TO, ...), squeue/sacct
// --format fields, sacct time forms, and listings that look like squeue,
// sinfo, sacct and sprio; a mistyped command or flag gets a suggestion.
//
// It talks to the quorum only through the gRPC API (api/lattice/v1),
// trying every --server address before giving up, and sends each write
// with one client request id per invocation so a retried write is never
// applied twice. It must never import server or quorum internals, and all
// urfave/cli code stays in this package so a later move to urfave/cli v3
// stays local. cmd/latticectl calls Main; nothing else should.
package cli
