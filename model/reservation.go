package model

import (
	"fmt"
	"slices"
	"time"
)

// Reservation sets nodes aside from Start to End (Slurm's advanced
// reservation): only allocations submitted into it (--reservation NAME,
// by one of its Users or Tenants) may run on its nodes then, and no other
// allocation may start on them if its walltime would cross Start. Maint
// marks a maintenance window (Slurm's flags=maint): squeue's reason and
// sinfo's state say "maintenance" instead of "reserved".
type Reservation struct {
	Name  string    `json:"name"`
	Nodes []string  `json:"nodes"` // sorted, unique
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Users and Tenants may submit into it (either list matches); both
	// empty = only administrators may.
	Users   []string `json:"users,omitempty"`
	Tenants []string `json:"tenants,omitempty"`
	Maint   bool     `json:"maint,omitempty"`
	// CreatedBy is who created it; CreatedAt the command's time.
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Pending reasons a reservation gives.
const (
	// ReasonReservation: the allocation runs in a reservation that has not
	// started yet (or no longer exists). Slurm's Reservation.
	ReasonReservation = "Reservation"
	// ReasonMaintenance: the nodes it could run on are in a maintenance
	// reservation now or before its walltime would end. Slurm's
	// "ReqNodeNotAvail, Reserved for maintenance".
	ReasonMaintenance = "Maintenance"
	// ReasonReserved: the same for a reservation without the maint flag.
	// Slurm's "ReqNodeNotAvail, May be reserved for other job".
	ReasonReserved = "Reserved"
)

// MaxReservationNodes bounds the nodes of one reservation.
const MaxReservationNodes = 100000

// Validate checks a reservation's own fields (not that its nodes exist).
func (r *Reservation) Validate() error {
	switch {
	case !validName(r.Name) || len(r.Name) > 64:
		return fieldErr("name", r.Name, "letters, digits, '.', '-' and '_' (up to 64)")
	case len(r.Nodes) == 0:
		return fieldErr("nodes", "", "at least one node name or hostlist")
	case len(r.Nodes) > MaxReservationNodes:
		return fieldErr("nodes", fmt.Sprint(len(r.Nodes)), fmt.Sprintf("at most %d nodes", MaxReservationNodes))
	case r.Start.IsZero():
		return fieldErr("start", "", "a time")
	case !r.End.After(r.Start):
		return fieldErr("duration", r.End.Sub(r.Start).String(), "more than 0")
	}
	if !slices.IsSorted(r.Nodes) || len(slices.Compact(slices.Clone(r.Nodes))) != len(r.Nodes) {
		return fieldErr("nodes", CompressHostlist(r.Nodes), "sorted unique names")
	}
	for _, u := range r.Users {
		if u == "" {
			return fieldErr("users", "", "user names")
		}
	}
	for _, t := range r.Tenants {
		if t == "" {
			return fieldErr("tenants", "", "tenant names")
		}
	}
	return nil
}

// ActiveAt reports whether the reservation holds its nodes at t.
func (r *Reservation) ActiveAt(t time.Time) bool {
	return !t.Before(r.Start) && t.Before(r.End)
}

// Overlaps reports whether r and o share a node during a common time.
func (r *Reservation) Overlaps(o *Reservation) bool {
	if !r.Start.Before(o.End) || !o.Start.Before(r.End) {
		return false
	}
	i, j := 0, 0
	for i < len(r.Nodes) && j < len(o.Nodes) {
		switch {
		case r.Nodes[i] == o.Nodes[j]:
			return true
		case r.Nodes[i] < o.Nodes[j]:
			i++
		default:
			j++
		}
	}
	return false
}

// Admits reports whether user (of tenant) may run allocations in r. An
// administrator may run in any reservation (the caller decides that).
func (r *Reservation) Admits(user, tenant string) bool {
	return (user != "" && slices.Contains(r.Users, user)) || (tenant != "" && slices.Contains(r.Tenants, tenant))
}

// Clone returns a deep copy.
func (r *Reservation) Clone() *Reservation {
	c := *r
	c.Nodes = slices.Clone(r.Nodes)
	c.Users = slices.Clone(r.Users)
	c.Tenants = slices.Clone(r.Tenants)
	return &c
}
