package server

import (
	"errors"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/latticehpc/lattice/admission"
	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// wireOf is what admission checks of a request's wire form.
func wireOf(p *latticev1.AllocationRequest) admission.Wire {
	if p == nil {
		return admission.Wire{}
	}
	return admission.Wire{WalltimeSeconds: p.WalltimeSeconds, NodeNames: len(p.NodeList) + len(p.ExcludeNodes)}
}

// admissionError maps an admission refusal to a gRPC status: denials are
// PermissionDenied, field rules and the other refusals InvalidArgument.
func admissionError(err error) error {
	var r *admission.Refusal
	if !errors.As(err, &r) {
		return rpcError(err)
	}
	var fe *model.FieldError
	switch {
	case r.Code == admission.CodeDenied:
		return status.Error(codes.PermissionDenied, r.Err.Error())
	case errors.As(r.Err, &fe):
		return status.Error(codes.InvalidArgument, fe.Error())
	case r.Code == admission.CodeLimits || r.Code == admission.CodeInvalid || r.Code == admission.CodeArraySize:
		return rpcError(r.Err)
	}
	return status.Error(codes.InvalidArgument, r.Err.Error())
}

// listPageBytes bounds one page of a listing, well under the 4 MiB a gRPC
// client accepts by default.
const listPageBytes = 2 << 20

// listed is an allocation as a listing shows it: without its script and
// environment (Get has them), which may be large.
func listed(p *latticev1.Allocation) *latticev1.Allocation {
	if r := p.Request; r != nil && (r.Script != "" || len(r.Env) > 0 || len(r.ScriptBytes) > 0) {
		c := proto.Clone(r).(*latticev1.AllocationRequest)
		c.Script, c.Env, c.ScriptBytes = "", nil, nil
		p.Request = c
	}
	return p
}

// parsePageToken reads a listing's page token: the id after which it
// continues ("" = from the start).
func parsePageToken(tok string) (uint64, error) {
	if tok == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		return 0, status.Error(codes.InvalidArgument, "invalid page_token: allowed the next_page_token of a previous page")
	}
	return n, nil
}
