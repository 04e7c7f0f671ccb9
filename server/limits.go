package server

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// checkWireRequest checks what must be checked on the wire form, before any
// conversion: a walltime in seconds beyond the limit would wrap around when
// multiplied into a time.Duration (584 years became one hour).
func checkWireRequest(p *latticev1.AllocationRequest) error {
	if p == nil {
		return nil
	}
	if p.WalltimeSeconds < 0 || p.WalltimeSeconds > model.MaxWalltimeSecond {
		return status.Error(codes.InvalidArgument, (&model.FieldError{Field: "walltime",
			Value: fmt.Sprintf("%d seconds", p.WalltimeSeconds), Allowed: "a duration > 0 and at most 365 days"}).Error())
	}
	if n := len(p.NodeList) + len(p.ExcludeNodes); n > model.MaxHostlistNodes {
		return status.Error(codes.InvalidArgument, (&model.FieldError{Field: "nodelist",
			Value: fmt.Sprintf("%d names", n), Allowed: fmt.Sprintf("at most %d node names", model.MaxHostlistNodes)}).Error())
	}
	return nil
}

// checkLimits applies model.CheckLimits to a converted request.
func checkLimits(r *model.Request) error {
	if err := r.CheckLimits(); err != nil {
		return rpcError(err)
	}
	return nil
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
