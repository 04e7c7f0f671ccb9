// Package convert is the one proto⇄model converter of the API: requests,
// allocations, nodes and usage between api/lattice/v1 and model. The gRPC
// handlers and the leader's dispatcher (the agents' assignments) share it.
// It imports only api and model.
package convert
