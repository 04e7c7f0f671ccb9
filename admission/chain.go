package admission

import (
	"errors"
	"fmt"

	"github.com/latticehpc/lattice/auth"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// Code names the check that refused a request.
type Code string

// The checks' codes, in the order Submit runs them.
const (
	CodeWire          Code = "wire"           // beyond what the wire form carries safely
	CodeSite          Code = "site"           // unknown QOS, or beyond a QOS's limits
	CodeTasks         Code = "tasks"          // tasks no node can hold
	CodeLimits        Code = "limits"         // model.Request.CheckLimits
	CodeInvalid       Code = "invalid"        // model.Request.Validate (defaults applied)
	CodeArraySize     Code = "array_size"     // indexes beyond the site's max array size
	CodeDenied        Code = "denied"         // authorization: tenant, QOS ceiling, keeping a never-fitting request
	CodeUnknownTenant Code = "unknown_tenant" // the tenant does not exist
	CodeNeverFits     Code = "never_fits"     // no nodes the vCluster may ever have could run it
	CodeNoChange      Code = "no_change"      // an update that changes nothing
)

// Refusal is why a check refused a request. Err is what the caller is
// told (a *model.FieldError for field rules).
type Refusal struct {
	Code Code
	Err  error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

func refuse(code Code, err error) *Refusal { return &Refusal{Code: code, Err: err} }

func refusef(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Err: fmt.Errorf(format, args...)}
}

// CodeOf is the code of err's Refusal ("" when it is none).
func CodeOf(err error) Code {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// Settings are the site's settings the checks read.
type Settings struct {
	// AuthOn: calls carry identities and the authorization checks apply;
	// off, every caller may do everything (and Identity is nil).
	AuthOn bool
	// MaxArraySize bounds array indexes (0 = model.DefaultMaxArraySize).
	MaxArraySize int
}

// ArraySize is the site's array size limit.
func (s Settings) ArraySize() int {
	if s.MaxArraySize > 0 {
		return s.MaxArraySize
	}
	return model.DefaultMaxArraySize
}

// Chain runs the checks over a read view of committed state.
type Chain struct {
	// View gives read access to committed state (quorum.Quorum.View).
	View func(func(*quorum.State))
	Settings
}

// Submission is one request as Submit receives it.
type Submission struct {
	// Request is the converted request (secrets already dropped).
	Request model.Request
	// Wire is the request's figures as they came on the wire.
	Wire Wire
	// KeepIfNeverFits keeps a request no nodes could ever run (admins).
	KeepIfNeverFits bool
	// Reservation, when set, checks the request's use of a reservation
	// right after authorization (the member's rule: reservation_service.go).
	Reservation func(r *model.Request) error
}

// Submit runs every check of a submission in order — wire limits, site
// (QOS and partition), tenant and interactive vCluster filled in, task
// fit, limits, validation with the defaults applied, array size,
// authorization, keeping a never-fitting request, never-fits — and returns
// the request to propose — prepared (Prepare), stamped with its user — and,
// for the caller's replies, the same.
func (c *Chain) Submit(id *auth.Identity, sub Submission) (propose, checked model.Request, err error) {
	if err := sub.Wire.Check(); err != nil {
		return model.Request{}, model.Request{}, err
	}
	r := sub.Request
	if err := c.Site(&r); err != nil {
		return model.Request{}, model.Request{}, err
	}
	c.FillTenant(id, &r)
	c.InteractiveVCluster(&r)
	if err := c.FitTasks(&r, sub.KeepIfNeverFits); err != nil {
		return model.Request{}, model.Request{}, err
	}
	check := r
	c.Prepare(&check)
	if err := Limits(&check); err != nil {
		return model.Request{}, model.Request{}, err
	}
	if err := check.Validate(); err != nil {
		return model.Request{}, model.Request{}, refuse(CodeInvalid, err)
	}
	if err := model.CheckArraySize(check.Array, c.ArraySize()); err != nil {
		return model.Request{}, model.Request{}, refuse(CodeArraySize, err)
	}
	if err := c.Authorize(id, &check); err != nil {
		return model.Request{}, model.Request{}, err
	}
	if sub.Reservation != nil {
		if err := sub.Reservation(&check); err != nil {
			return model.Request{}, model.Request{}, err
		}
	}
	keep := sub.KeepIfNeverFits
	if keep && !c.IsAdmin(id) {
		return model.Request{}, model.Request{}, refusef(CodeDenied, "permission denied: %s may not keep a request that never fits: only an admin may (or submit with --hold)", id)
	}
	if !keep && !check.Hold {
		if err := c.EverFits(&check); err != nil {
			return model.Request{}, model.Request{}, err
		}
	}
	return check, check, nil
}

// Prepare makes a submitted request what its entry will say, before it is
// checked and proposed: its vCluster resolved (a partition name, or the
// default vCluster when it names none) and the defaults of this release
// applied. The entry is proposed Prepared: Apply takes the request as it
// is (quorum.Submit), so a default or rule changed by a later release
// never changes how this entry applies.
func (c *Chain) Prepare(r *model.Request) {
	c.View(func(st *quorum.State) { r.VCluster = st.ResolveDefaultVCluster(r.VCluster) })
	r.ApplyDefaults()
}

// Stage checks one stage of a workflow before the workflow is planned
// (dag.Spec.Plan validates it): wire and request limits. Each planned
// stage then passes Authorize.
func (c *Chain) Stage(w Wire, r *model.Request) error {
	if err := w.Check(); err != nil {
		return err
	}
	return Limits(r)
}

// IsAdmin reports whether id may do what only admins may (everyone, with
// auth off).
func (c *Chain) IsAdmin(id *auth.Identity) bool {
	if !c.AuthOn {
		return true
	}
	return id != nil && id.Role == auth.RoleAdmin
}

// Limits applies model.Request.CheckLimits.
func Limits(r *model.Request) error {
	if err := r.CheckLimits(); err != nil {
		return refuse(CodeLimits, err)
	}
	return nil
}
