package admission

import (
	"sort"
	"strings"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Authorize checks a request against the caller before it is proposed and
// stamps its owner: the tenant must exist (CodeUnknownTenant) and the
// caller belong to it, and its priority class must be within the caller's
// QOS ceiling (CodeDenied). Unknown tenants are rejected, never created.
// With auth off every request passes.
func (c *Chain) Authorize(id *auth.Identity, r *model.Request) error {
	if !c.AuthOn {
		return nil
	}
	c.FillTenant(id, r)
	tenant := r.Tenant
	if err := auth.CanSubmit(id, tenant, r.PriorityClass); err != nil {
		return refuse(CodeDenied, err)
	}
	var known []string
	exists := false
	c.View(func(st *quorum.State) {
		exists = st.Tenant(tenant) != nil
		if !exists {
			for _, t := range st.Tenants() {
				known = append(known, t.Name)
			}
		}
	})
	if !exists {
		sort.Strings(known)
		return refusef(CodeUnknownTenant, "unknown tenant %q: allowed one of [%s] (an admin creates tenants with `latticectl tenant set`)",
			tenant, strings.Join(known, ", "))
	}
	r.User = id.User
	return nil
}
