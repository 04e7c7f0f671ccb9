package rpc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Error maps an internal error to a gRPC status. Raw Raft errors never
// reach users: they become Unavailable with a retry hint.
func Error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fe *model.FieldError
	var rej *quorum.Rejection
	var le *quorum.LevelError
	switch {
	case errors.As(err, &le):
		return status.Error(codes.FailedPrecondition, le.Error())
	case errors.As(err, &fe):
		return status.Error(codes.InvalidArgument, fe.Error())
	case errors.As(err, &rej):
		return Rejection(rej)
	case errors.Is(err, quorum.ErrNotLeader):
		return status.Error(codes.Unavailable, "this member is not the quorum leader and no leader is known; retry")
	case errors.Is(err, quorum.ErrUnknownOutcome):
		return status.Error(codes.Unavailable, "leadership changed while the request was applied; retry (the request id makes it safe)")
	case errors.Is(err, quorum.ErrShutdown):
		return status.Error(codes.Unavailable, "quorum member is shutting down; retry another")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "cancelled")
	}
	return status.Error(codes.Internal, err.Error())
}

// Rejection maps a quorum rejection to a gRPC status.
func Rejection(r *quorum.Rejection) error {
	code := codes.FailedPrecondition
	switch r.Code {
	case quorum.CodeInvalid:
		code = codes.InvalidArgument
	case quorum.CodeNotFound:
		code = codes.NotFound
	case quorum.CodeQuota, quorum.CodePower:
		code = codes.ResourceExhausted
	}
	return status.Error(code, r.Message)
}

// NotFound, Invalid, FailedPrecondition and Unavailable are statuses of
// those codes with a formatted message.
func NotFound(format string, args ...any) error {
	return status.Errorf(codes.NotFound, format, args...)
}

func Invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func FailedPrecondition(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}

func Unavailable(format string, args ...any) error {
	return status.Errorf(codes.Unavailable, format, args...)
}

// Deny maps an object rule's refusal to PermissionDenied (nil stays nil).
func Deny(err error) error {
	if err == nil {
		return nil
	}
	return status.Error(codes.PermissionDenied, err.Error())
}
