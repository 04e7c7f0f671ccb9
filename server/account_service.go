package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latticehpc/lattice/auth"
)

// canListTenant refuses a listing of a tenant the caller may not see,
// naming the tenants it may use.
func (s *Server) canListTenant(ctx context.Context, tenant string) error {
	err := s.canRead(ctx, "list", auth.Object{Kind: "tenant", ID: tenant, Tenant: tenant})
	if err != nil {
		return status.Errorf(codes.PermissionDenied, "%s; they may use tenant(s) %s", status.Convert(err).Message(), caller(ctx).TenantsText())
	}
	return nil
}
