package auth

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/latticehpc/lattice/model"
)

// Role is what an identity may do.
type Role string

// The roles, from least to most trusted for humans; RoleAgent is for node
// agents only and may do nothing a human does.
const (
	RoleUser        Role = "user"
	RoleTenantAdmin Role = "tenant-admin"
	RoleAdmin       Role = "admin"
	RoleAgent       Role = "agent"
)

// Roles lists every role (for messages and flags).
var Roles = []Role{RoleUser, RoleTenantAdmin, RoleAdmin, RoleAgent}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if slices.Contains(Roles, r) {
		return r, nil
	}
	return "", &model.FieldError{Field: "role", Value: s, Allowed: "user, tenant-admin, admin or agent"}
}

// human reports whether the role is a person's (not an agent's).
func (r Role) human() bool { return r == RoleUser || r == RoleTenantAdmin || r == RoleAdmin }

// DefaultMaxPriority is the QOS ceiling of users and tenant-admins whose
// entry names none: they may ask for priority classes 0..5; admins for any.
const DefaultMaxPriority = 5

// Identity is who made a call, as the tokens file describes them.
type Identity struct {
	User string
	Role Role
	// Tenants the identity belongs to (users, tenant-admins); "*" = every
	// tenant.
	Tenants []string
	// Nodes an agent may register and report for: names or path.Match
	// patterns such as "node0*".
	Nodes []string
	// MaxPriority is the highest priority class the identity may ask for
	// (the QOS ceiling); -1 = the role's default.
	MaxPriority int
	// DefaultTenant is the tenant of a call that names none ("" = the
	// first of Tenants, else model.DefaultTenant).
	DefaultTenant string
	// Via says how the caller authenticated: "munge", "token", "cert",
	// "tokens-file" (for messages and the audit log).
	Via string
	// UID is the Unix uid MUNGE vouched for (Via "munge" only).
	UID int
}

// TenantOf is the tenant a call acts in: the one it names, else the
// identity's default tenant, else model.DefaultTenant.
func (id *Identity) TenantOf(named string) string {
	switch {
	case named != "":
		return named
	case id == nil:
		return model.DefaultTenant
	case id.DefaultTenant != "":
		return id.DefaultTenant
	case len(id.Tenants) > 0 && id.Tenants[0] != "*":
		return id.Tenants[0]
	}
	return model.DefaultTenant
}

// TenantsText lists the tenants an identity may use, for messages.
func (id *Identity) TenantsText() string {
	switch {
	case id == nil:
		return "none"
	case id.Role == RoleAdmin || slices.Contains(id.Tenants, "*"):
		return "any tenant"
	case len(id.Tenants) == 0:
		return "none"
	}
	return strings.Join(id.Tenants, ", ")
}

// String names the identity in messages and audit lines.
func (id *Identity) String() string {
	if id == nil {
		return "anonymous"
	}
	return fmt.Sprintf("%s (%s)", id.User, id.Role)
}

// InTenant reports whether the identity belongs to tenant t.
func (id *Identity) InTenant(t string) bool {
	if id == nil {
		return false
	}
	if id.Role == RoleAdmin {
		return true
	}
	return slices.Contains(id.Tenants, t) || slices.Contains(id.Tenants, "*")
}

// OwnsNode reports whether an agent identity may register and report for
// node name.
func (id *Identity) OwnsNode(name string) bool {
	if id == nil || id.Role != RoleAgent {
		return false
	}
	for _, p := range id.Nodes {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// PriorityCeiling is the highest priority class the identity may ask for.
func (id *Identity) PriorityCeiling() int {
	switch {
	case id == nil:
		return -1
	case id.Role == RoleAdmin:
		return model.MaxPriorityClass
	case id.MaxPriority >= 0:
		return min(id.MaxPriority, model.MaxPriorityClass)
	}
	return DefaultMaxPriority
}

// Validate checks an identity as a tokens file entry.
func (id *Identity) Validate() error {
	if !model.IsName(id.User) {
		return &model.FieldError{Field: "user", Value: id.User, Allowed: "letters, digits, '.', '-' and '_'"}
	}
	if _, err := ParseRole(string(id.Role)); err != nil {
		return err
	}
	for _, t := range id.Tenants {
		if t != "*" && !model.IsName(t) {
			return &model.FieldError{Field: "tenant", Value: t, Allowed: "a tenant name or *"}
		}
	}
	if (id.Role == RoleUser || id.Role == RoleTenantAdmin) && len(id.Tenants) == 0 {
		return &model.FieldError{Field: "tenant", Allowed: "at least one tenant for role " + string(id.Role)}
	}
	if id.Role == RoleAgent && len(id.Nodes) == 0 {
		return &model.FieldError{Field: "nodes", Allowed: "at least one node name or pattern for role agent"}
	}
	for _, n := range id.Nodes {
		if _, err := path.Match(n, ""); err != nil || strings.ContainsAny(n, " \t,") {
			return &model.FieldError{Field: "nodes", Value: n, Allowed: "node names or path.Match patterns such as node0*"}
		}
	}
	if id.MaxPriority > model.MaxPriorityClass {
		return &model.FieldError{Field: "max-priority", Value: fmt.Sprint(id.MaxPriority), Allowed: "0..10"}
	}
	return nil
}
