package server

import (
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc"
)

// The handlers' error mapping is package rpc's (rpc/errors.go); these are
// its short names for the handlers still in server.

func rpcError(err error) error                 { return rpc.Error(err) }
func rejectionError(r *quorum.Rejection) error { return rpc.Rejection(r) }
func deny(err error) error                     { return rpc.Deny(err) }

func notFound(format string, args ...any) error { return rpc.NotFound(format, args...) }
func invalid(format string, args ...any) error  { return rpc.Invalid(format, args...) }
func failedPrecondition(format string, args ...any) error {
	return rpc.FailedPrecondition(format, args...)
}
func unavailable(format string, args ...any) error { return rpc.Unavailable(format, args...) }
