// Package rpc holds the member's gRPC handlers that have moved out of
// package server: thin handlers over a Member (propose, read committed
// state, the caller's identity, the admission chain), the mapping of
// internal errors to gRPC statuses, and the object rules as the handlers
// apply them. The one proto⇄model converter is rpc/convert; rpc/rest is the
// REST gateway and the dashboard's login.
//
// Handlers here so far: AccountService (account.go). The other services'
// handlers are still in package server, which registers these next to
// them.
package rpc
