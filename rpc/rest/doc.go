// Package rest serves a member's HTTP face on --http: the REST/JSON API
// under /api/v1/ (grpc-gateway's mapping of the gRPC services, generated
// into api/lattice/v1/gateway from the same protos), its OpenAPI document,
// a server-sent-events stream of state changes, and the web dashboard of
// package web under /ui/ with its login.
//
// Every API call goes through a gRPC client connection to the member's own
// gRPC server (an in-process listener), so the interceptors apply exactly
// as to latticectl: authentication, the method rules, the handlers' tenant
// rules, the audit log, forwarding to the leader. A browser's session
// cookie becomes the bearer credential of those calls; Sessions keeps the
// sessions (in the member's memory) and resolves them to an auth.Identity
// for the server's authenticator. The package never reads the quorum's
// state itself and never decides who may do what.
package rest
