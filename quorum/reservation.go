package quorum

import (
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Node reservations (scontrol create/delete reservation, latticectl
// reservation): commands SetReservation and DeleteReservation (schema.go),
// and Request.Reservation of a submission (gated by Level below).

// SetReservation creates a reservation, or replaces the one of the same
// name when Update is set. Its nodes are chosen before it is proposed
// (a --count becomes names then). Reservations that ended before the
// command's time are dropped by it.
type SetReservation struct {
	Header
	Reservation model.Reservation `json:"reservation"`
	Update      bool              `json:"update,omitempty"`
}

// DeleteReservation deletes a reservation. Allocations submitted into it
// stay pending with reason Reservation until cancelled or updated.
type DeleteReservation struct {
	Header
	Name string `json:"name"`
}

// Level gates a submission into a reservation (model.Request.Reservation,
// a field older members would drop): Level1.
func (c *Submit) Level() Level {
	for i := range c.Items {
		if c.Items[i].Request.Reservation != "" {
			return Level1
		}
	}
	return LevelBase
}

// Level is Submit's Level over the batch.
func (c *SubmitBatch) Level() Level {
	for i := range c.Submissions {
		if c.Submissions[i].Level() > LevelBase {
			return Level1
		}
	}
	return LevelBase
}

func (s *State) applySetReservation(c *SetReservation) *Result {
	r := c.Reservation.Clone()
	if err := r.Validate(); err != nil {
		return &Result{Rejection: reject(CodeInvalid, "", "%v", err)}
	}
	if !r.End.After(c.Time) {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid end %s: the reservation would already be over (at %s)",
			r.End.UTC().Format(time.RFC3339), c.Time.UTC().Format(time.RFC3339))}
	}
	var missing []string
	for _, n := range r.Nodes {
		if s.nodes[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return &Result{Rejection: reject(CodeInvalid, "", "invalid nodes %s: no such node", model.CompressHostlist(missing))}
	}
	s.dropEndedReservations(c.Time)
	i := slices.IndexFunc(s.reservations, func(o *model.Reservation) bool { return o.Name == r.Name })
	switch {
	case i >= 0 && !c.Update:
		return &Result{Rejection: reject(CodeConflict, "", "reservation %q already exists", r.Name)}
	case i < 0 && c.Update:
		return &Result{Rejection: reject(CodeNotFound, "", "reservation %q does not exist", r.Name)}
	}
	for _, o := range s.reservations {
		if o.Name != r.Name && r.Overlaps(o) {
			return &Result{Rejection: reject(CodeConflict, "", "reservation %q overlaps reservation %q (%s from %s to %s) on its nodes",
				r.Name, o.Name, model.CompressHostlist(o.Nodes), o.Start.UTC().Format(time.RFC3339), o.End.UTC().Format(time.RFC3339))}
		}
	}
	list := slices.Clone(s.reservations)
	if i >= 0 {
		r.CreatedBy, r.CreatedAt = list[i].CreatedBy, list[i].CreatedAt
		list[i] = r
	} else {
		if r.CreatedAt.IsZero() {
			r.CreatedAt = c.Time
		}
		list = append(list, r)
		slices.SortFunc(list, func(a, b *model.Reservation) int { return strings.Compare(a.Name, b.Name) })
	}
	s.reservations = list
	s.touch()
	return &Result{}
}

func (s *State) applyDeleteReservation(c *DeleteReservation) *Result {
	i := slices.IndexFunc(s.reservations, func(o *model.Reservation) bool { return o.Name == c.Name })
	if i < 0 {
		return &Result{Rejection: reject(CodeNotFound, "", "reservation %q does not exist", c.Name)}
	}
	s.reservations = slices.Delete(slices.Clone(s.reservations), i, i+1)
	s.dropEndedReservations(c.Time)
	s.touch()
	return &Result{}
}

// dropEndedReservations forgets reservations over by t (a command's time).
func (s *State) dropEndedReservations(t time.Time) {
	if !slices.ContainsFunc(s.reservations, func(o *model.Reservation) bool { return !o.End.After(t) }) {
		return
	}
	s.reservations = slices.DeleteFunc(slices.Clone(s.reservations), func(o *model.Reservation) bool { return !o.End.After(t) })
}

// Reservations lists the reservations by name, those over by now left out
// (now is the reader's clock: the state keeps an ended one until the next
// reservation command). The reservations are shared: never modify them.
func (s *State) Reservations(now time.Time) []*model.Reservation {
	out := make([]*model.Reservation, 0, len(s.reservations))
	for _, r := range s.reservations {
		if now.IsZero() || r.End.After(now) {
			out = append(out, r)
		}
	}
	return out
}

// Reservation returns one reservation by name, or nil.
func (s *State) Reservation(name string) *model.Reservation {
	for _, r := range s.reservations {
		if r.Name == name {
			return r
		}
	}
	return nil
}
