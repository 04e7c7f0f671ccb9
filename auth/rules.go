package auth

import (
	"fmt"
	"strings"
)

// Access is who may call a method at all. Object-level rules (whose
// allocation, which tenant) are checked by the handler with CanRead,
// CanChange and CanSubmit.
type Access int

const (
	// Public methods need no identity (gRPC health checks).
	Public Access = iota
	// Human methods need a user, tenant-admin or admin; the handler limits
	// what each sees and changes.
	Human
	// Admin methods need the admin role.
	Admin
	// Agent methods need an agent identity; the handler checks node names.
	Agent
)

func (a Access) String() string {
	switch a {
	case Public:
		return "anyone"
	case Human:
		return "a user, tenant-admin or admin"
	case Admin:
		return "an admin"
	case Agent:
		return "a node agent"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Rules is the method-level rule of every RPC, by gRPC full method name. A
// method missing here is refused (server tests check that every registered
// method has a rule).
var Rules = map[string]Access{
	"/grpc.health.v1.Health/Check": Public,
	"/grpc.health.v1.Health/List":  Public,
	"/grpc.health.v1.Health/Watch": Public,

	"/lattice.v1.AllocationService/Submit":         Human,
	"/lattice.v1.AllocationService/Get":            Human,
	"/lattice.v1.AllocationService/List":           Human,
	"/lattice.v1.AllocationService/Cancel":         Human,
	"/lattice.v1.AllocationService/Logs":           Human,
	"/lattice.v1.AllocationService/Explain":        Human,
	"/lattice.v1.AllocationService/Checkpoint":     Human,
	"/lattice.v1.AllocationService/CheckpointDone": Human,
	// Job control: the handler applies CanChange to each allocation.
	"/lattice.v1.AllocationService/Hold":    Human,
	"/lattice.v1.AllocationService/Release": Human,
	"/lattice.v1.AllocationService/Requeue": Human,
	"/lattice.v1.AllocationService/Update":  Human,
	"/lattice.v1.AllocationService/Signal":  Human,
	// Site configuration: everyone reads it, admins change it.
	"/lattice.v1.AllocationService/ListQOS":      Human,
	"/lattice.v1.AllocationService/SetQOS":       Admin,
	"/lattice.v1.AllocationService/SetPartition": Admin,
	"/lattice.v1.AllocationService/SubmitBatch":  Human,

	// A step runs inside an allocation its caller may change (the object rule
	// is checked by the handler); the srun shim calls it from the job.
	"/lattice.v1.StepService/Launch": Human,
	// A terminal step or attach, checked the same way (terminal_service.go).
	"/lattice.v1.TerminalService/Terminal": Human,

	// Usage: reading follows CanRead (the handler); suspend is for admins.
	"/lattice.v1.UsageService/Stat":    Human,
	"/lattice.v1.UsageService/Report":  Human,
	"/lattice.v1.UsageService/Suspend": Admin,

	// Node reservations: everyone lists them, admins change them.
	"/lattice.v1.ReservationService/ListReservations":  Human,
	"/lattice.v1.ReservationService/CreateReservation": Admin,
	"/lattice.v1.ReservationService/UpdateReservation": Admin,
	"/lattice.v1.ReservationService/DeleteReservation": Admin,

	"/lattice.v1.DAGService/SubmitDAG": Human,
	"/lattice.v1.DAGService/GetDAG":    Human,
	"/lattice.v1.DAGService/ListDAGs":  Human,
	"/lattice.v1.DAGService/CancelDAG": Human,

	"/lattice.v1.ScalingService/CreateService": Human,
	"/lattice.v1.ScalingService/UpdateService": Human,
	"/lattice.v1.ScalingService/DeleteService": Human,
	"/lattice.v1.ScalingService/GetService":    Human,
	"/lattice.v1.ScalingService/ListServices":  Human,

	"/lattice.v1.NodeService/List":      Human,
	"/lattice.v1.NodeService/Drain":     Admin,
	"/lattice.v1.NodeService/Undrain":   Admin,
	"/lattice.v1.NodeService/SetState":  Admin,
	"/lattice.v1.NodeService/Register":  Agent,
	"/lattice.v1.NodeService/Heartbeat": Agent,

	"/lattice.v1.AgentService/Connect": Agent,

	"/lattice.v1.AdminService/QuorumStatus":  Human,
	"/lattice.v1.AdminService/ListVClusters": Human,
	"/lattice.v1.AdminService/GetPower":      Human,
	"/lattice.v1.AdminService/ListTenants":   Human,
	// Backup streams every job's environment: admins only.
	"/lattice.v1.AdminService/Backup":                   Admin,
	"/lattice.v1.AdminService/QuorumJoin":               Admin,
	"/lattice.v1.AdminService/QuorumRemove":             Admin,
	"/lattice.v1.AdminService/QuorumTransferLeadership": Admin,
	"/lattice.v1.AdminService/SetVCluster":              Admin,
	"/lattice.v1.AdminService/SetPowerBudget":           Admin,
	"/lattice.v1.AdminService/SetTenant":                Admin,
	"/lattice.v1.AdminService/InjectFault":              Admin,

	// Users, tokens and tenant deletion (sacctmgr): admins change them;
	// everyone may ask who they are and list the users they share a tenant
	// with.
	"/lattice.v1.AccountService/WhoAmI":       Human,
	"/lattice.v1.AccountService/ListUsers":    Human,
	"/lattice.v1.AccountService/AddUser":      Admin,
	"/lattice.v1.AccountService/ModifyUser":   Admin,
	"/lattice.v1.AccountService/DeleteUser":   Admin,
	"/lattice.v1.AccountService/DeleteTenant": Admin,
	"/lattice.v1.AccountService/CreateToken":  Admin,
	"/lattice.v1.AccountService/ListTokens":   Admin,
	"/lattice.v1.AccountService/RevokeToken":  Admin,
	"/lattice.v1.AccountService/ImportTokens": Admin,

	// The dashboard's login: a code for the caller's own identity.
	"/lattice.v1.DashboardService/CreateLogin":  Human,
	"/lattice.v1.DashboardService/WhoAmI":       Human,
	"/lattice.v1.DashboardService/PowerHistory": Human,
}

// Denied says what was refused and why; the server maps it to
// PermissionDenied.
type Denied struct {
	Who  string // the identity
	What string // "cancel allocation 12", "call NodeService/Drain"
	Why  string // "it belongs to bob of tenant physics"
}

func (d *Denied) Error() string {
	return fmt.Sprintf("permission denied: %s may not %s: %s", d.Who, d.What, d.Why)
}

// Authorize applies Rules to a call. id is nil when the caller presented no
// valid credential; the server refuses such calls as Unauthenticated
// before asking, except for Public methods.
func Authorize(method string, id *Identity) error {
	access, ok := Rules[method]
	what := "call " + strings.TrimPrefix(strings.TrimPrefix(method, "/"), "lattice.v1.")
	if !ok {
		return &Denied{Who: id.String(), What: what, Why: "the method has no authorization rule"}
	}
	allowed := false
	switch access {
	case Public:
		allowed = true
	case Human:
		allowed = id != nil && id.Role.human()
	case Admin:
		allowed = id != nil && id.Role == RoleAdmin
	case Agent:
		allowed = id != nil && id.Role == RoleAgent
	}
	if !allowed {
		return &Denied{Who: id.String(), What: what, Why: "only " + access.String() + " may"}
	}
	return nil
}

// Object is what an object-level rule is about: an allocation or DAG, its
// owner and tenant.
type Object struct {
	Kind   string // "allocation", "workflow"
	ID     string
	Owner  string // the submitting user; "" for work submitted without auth
	Tenant string
}

func (o Object) String() string { return o.Kind + " " + o.ID }

func (o Object) belongs() string {
	if o.Owner == "" {
		return "it belongs to tenant " + o.Tenant
	}
	return fmt.Sprintf("it belongs to %s of tenant %s", o.Owner, o.Tenant)
}

// CanRead: users see their own work and, read-only, their tenants'; tenant
// admins their tenants'; admins everything.
func CanRead(id *Identity, verb string, o Object) error {
	if id != nil && (id.Role == RoleAdmin || (id.Role.human() && id.InTenant(o.Tenant))) {
		return nil
	}
	return &Denied{Who: id.String(), What: verb + " " + o.String(), Why: o.belongs()}
}

// CanChange: users change (cancel, checkpoint, hold) their own work only;
// tenant-admins their tenants'; admins everything.
func CanChange(id *Identity, verb string, o Object) error {
	switch {
	case id == nil || !id.Role.human():
	case id.Role == RoleAdmin:
		return nil
	case id.Role == RoleTenantAdmin && id.InTenant(o.Tenant):
		return nil
	case id.Role == RoleUser && o.Owner != "" && o.Owner == id.User:
		return nil
	}
	return &Denied{Who: id.String(), What: verb + " " + o.String(), Why: o.belongs()}
}

// CanSubmit: a user submits only to tenants they belong to and only up to
// their priority ceiling (QOS).
func CanSubmit(id *Identity, tenant string, priorityClass int) error {
	if id == nil || !id.Role.human() {
		return &Denied{Who: id.String(), What: "submit", Why: "only a user, tenant-admin or admin may"}
	}
	if !id.InTenant(tenant) {
		return &Denied{Who: id.String(), What: "submit to tenant " + tenant,
			Why: "they may use tenant(s) " + id.TenantsText() + " (--tenant names one of them; an admin adds more with `latticectl user modify " + id.User + " --add-tenants " + tenant + "`)"}
	}
	if c := id.PriorityCeiling(); priorityClass > c {
		return &Denied{Who: id.String(), What: fmt.Sprintf("submit with priority class %d", priorityClass),
			Why: fmt.Sprintf("their QOS ceiling is priority class %d", c)}
	}
	return nil
}

// CanReportFor: an agent registers, heartbeats and reports only for the
// nodes its credential names.
func CanReportFor(id *Identity, node string) error {
	if id.OwnsNode(node) {
		return nil
	}
	why := "it is not one of the node patterns " + strings.Join(nodesOf(id), ",")
	return &Denied{Who: id.String(), What: "report for node " + node, Why: why}
}

func nodesOf(id *Identity) []string {
	if id == nil {
		return nil
	}
	return id.Nodes
}
