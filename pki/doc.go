// Package pki owns Lattice's use of TLS: loading a party's certificate, key
// and CA from PEM files into tls.Configs (the API server, its clients, and
// the Raft transport between quorum members) and minting a development CA
// with member and client certificates (`latticed ca init`).
//
// Member certificates carry the organizational unit MemberOU; the Raft
// transport accepts only peers whose certificate, signed by the cluster CA,
// has it, so holding the CA's trust is not enough to join the quorum's
// traffic. Client certificates (no MemberOU) identify users and agents by
// their common name; the server maps it through the tokens file.
//
// It never reads the environment or flags; cmd/latticed and cli pass the
// file names in. It imports only the standard library.
package pki
