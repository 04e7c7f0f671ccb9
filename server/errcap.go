package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/model"
)

// maxErrorMessage bounds what any refusal says: messages quote what the
// caller sent (names, ids, paths…), and input is unbounded. Field errors
// clip each quoted value (model.Quote); this cap catches every other path.
const maxErrorMessage = 2048

// clipError returns err with its status message clipped to maxErrorMessage
// bytes (code and details kept).
func clipError(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok || len(st.Message()) <= maxErrorMessage {
		return err
	}
	p := st.Proto()
	p.Message = model.Clip(p.Message, maxErrorMessage)
	return status.FromProto(p).Err()
}

// clipErrorsUnary and clipErrorsStream run outermost, so every error a
// client sees — from the interceptors and the handlers — is bounded.
func clipErrorsUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, clipError(err)
}

func clipErrorsStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return clipError(handler(srv, ss))
}
