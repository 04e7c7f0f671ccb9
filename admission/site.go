package admission

import (
	"fmt"
	"strings"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Site applies the site configuration to a submission: its QOS (class,
// limits, default vCluster) and its partition name.
func (c *Chain) Site(r *model.Request) error {
	if r.QOS == "" {
		return nil
	}
	q, err := c.QOS(r.QOS)
	if err != nil {
		return err
	}
	r.QOS, r.PriorityClass = q.Name, q.PriorityClass
	if r.VCluster == "" {
		r.VCluster = q.VCluster
	}
	if err := q.CheckRequest(r); err != nil {
		return refuse(CodeSite, err)
	}
	return nil
}

// QOS finds a QOS by name in the committed table (CodeSite, naming the
// known ones, when there is none).
func (c *Chain) QOS(name string) (model.QOS, error) {
	var q model.QOS
	var ok bool
	var names []string
	c.View(func(st *quorum.State) {
		if q, ok = st.QOS(name); !ok {
			for _, e := range st.QOSTable() {
				names = append(names, fmt.Sprintf("%s (%d)", e.Name, e.PriorityClass))
			}
		}
	})
	if !ok {
		return q, refusef(CodeSite, "invalid qos %q: allowed %s (an admin adds more with `latticectl qos set`)", name, strings.Join(names, ", "))
	}
	return q, nil
}

// DefaultTenantOf is the tenant a call of id acts in when it names none:
// the identity's default tenant, else its first tenant, else (admins and
// tokens that name none) the tenant named after the user when it exists,
// else model.DefaultTenant.
func (c *Chain) DefaultTenantOf(id *auth.Identity) string {
	if id == nil {
		return model.DefaultTenant
	}
	if id.DefaultTenant != "" || (len(id.Tenants) > 0 && id.Tenants[0] != "*") {
		return id.TenantOf("")
	}
	own := false
	c.View(func(st *quorum.State) { own = st.Tenant(id.User) != nil })
	if own {
		return id.User
	}
	return model.DefaultTenant
}

// FillTenant gives a request that names no tenant the caller's default
// tenant (with auth off: model.DefaultTenant, as ApplyDefaults would).
func (c *Chain) FillTenant(id *auth.Identity, r *model.Request) {
	if r.Tenant == "" && c.AuthOn {
		r.Tenant = c.DefaultTenantOf(id)
	}
}

// InteractiveVCluster sends an interactive request that names no vCluster
// to the site's interactive one (the first of that type, by name), with
// its short waits; with none, the default vCluster takes it.
func (c *Chain) InteractiveVCluster(r *model.Request) {
	if !r.Interactive || r.VCluster != "" {
		return
	}
	c.View(func(st *quorum.State) {
		for _, vc := range st.VClusters() {
			if vc.Type == model.TypeInteractive {
				r.VCluster = vc.Name
				return
			}
		}
	})
}
