// Package auth owns who may do what: identities (what the server's
// interceptors produce from a MUNGE credential, a bearer token — stored as
// a SHA-256 hash in the replicated state or a tokens file — or a client
// certificate named in a tokens file by its common name in cn: lines; the
// users and tokens themselves live in quorum), the four roles (user, tenant-admin, admin,
// agent), the method-level rule of every RPC (Rules, a table) and the
// object-level rules (who may see, change or submit to what).
//
// It is pure: no clock, no I/O beyond the io.Reader it is handed, no global
// state. The server wires it as gRPC interceptors (server/auth.go), reloads
// the tokens file and calls the object rules in its handlers; latticed's
// `token create` formats new entries with it.
package auth
