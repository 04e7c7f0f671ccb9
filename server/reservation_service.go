package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
	"github.com/latticehpc/lattice/rpc/convert"
)

// reservationService implements ReservationService: node reservations and
// maintenance windows (quorum.SetReservation, DeleteReservation). The
// nodes of a --count and a default name are chosen here, before the
// command is proposed; the solver plans around the reservations
// (solver.NodeReservation).
type reservationService struct {
	latticev1.UnimplementedReservationServiceServer
	s *Server
}

// maxReservationDuration bounds a reservation's length (Slurm accepts
// "infinite"; a year is as good here and keeps times in range).
const maxReservationDuration = 366 * 24 * time.Hour

func (r *reservationService) CreateReservation(ctx context.Context, req *latticev1.CreateReservationRequest) (*latticev1.NodeReservation, error) {
	now := r.s.cfg.Clock()
	res := model.Reservation{Name: req.Name, Users: req.Users, Tenants: req.Tenants, Maint: req.Maint}
	if id := caller(ctx); id != nil {
		res.CreatedBy = id.User
	}
	if err := r.times(&res, req, now, nil); err != nil {
		return nil, err
	}
	nodes, err := r.nodes(req, &res)
	if err != nil {
		return nil, err
	}
	res.Nodes = nodes
	if res.Name == "" {
		res.Name = r.defaultName(res.CreatedBy)
	}
	return r.set(ctx, &res, false, now)
}

func (r *reservationService) UpdateReservation(ctx context.Context, req *latticev1.CreateReservationRequest) (*latticev1.NodeReservation, error) {
	now := r.s.cfg.Clock()
	var old *model.Reservation
	r.s.view(func(st *quorum.State) {
		if o := st.Reservation(req.Name); o != nil && o.End.After(now) {
			old = o.Clone()
		}
	})
	if old == nil {
		return nil, status.Errorf(codes.NotFound, "reservation %q does not exist", req.Name)
	}
	res := old.Clone()
	given := func(f string) bool { return slices.Contains(req.UpdateFields, f) }
	for _, f := range req.UpdateFields {
		if !slices.Contains([]string{"nodes", "start", "duration", "end", "users", "tenants", "maint"}, f) {
			return nil, invalid("invalid update field %q: allowed nodes, start, duration, end, users, tenants, maint", f)
		}
	}
	if given("start") || given("duration") || given("end") {
		if err := r.times(res, req, now, old); err != nil {
			return nil, err
		}
	}
	if given("nodes") {
		nodes, err := r.nodes(req, res)
		if err != nil {
			return nil, err
		}
		res.Nodes = nodes
	}
	if given("users") {
		res.Users = req.Users
	}
	if given("tenants") {
		res.Tenants = req.Tenants
	}
	if given("maint") {
		res.Maint = req.Maint
	}
	return r.set(ctx, res, true, now)
}

// times sets res's start and end from req (old: the reservation updated,
// whose start and length are kept when not given).
func (r *reservationService) times(res *model.Reservation, req *latticev1.CreateReservationRequest, now time.Time, old *model.Reservation) error {
	start := now
	switch {
	case req.StartUnixMs > 0:
		start = time.UnixMilli(req.StartUnixMs).UTC()
	case old != nil && !slices.Contains(req.UpdateFields, "start"):
		start = old.Start
	}
	var end time.Time
	switch {
	case req.DurationSeconds < 0 || time.Duration(req.DurationSeconds)*time.Second > maxReservationDuration:
		return rpcError(&model.FieldError{Field: "duration", Value: fmt.Sprintf("%d seconds", req.DurationSeconds), Allowed: "more than 0, up to 366 days"})
	case req.DurationSeconds > 0:
		end = start.Add(time.Duration(req.DurationSeconds) * time.Second)
	case req.EndUnixMs > 0:
		end = time.UnixMilli(req.EndUnixMs).UTC()
	case old != nil:
		end = start.Add(old.End.Sub(old.Start))
	default:
		return rpcError(&model.FieldError{Field: "duration", Value: "", Allowed: "a duration (e.g. 2h, 90m, 1-00:00:00) or an end time"})
	}
	if !end.After(start) {
		return rpcError(&model.FieldError{Field: "duration", Value: end.Sub(start).String(), Allowed: "an end after the start"})
	}
	if end.Sub(start) > maxReservationDuration {
		return rpcError(&model.FieldError{Field: "duration", Value: end.Sub(start).String(), Allowed: "up to 366 days"})
	}
	if !end.After(now) {
		return rpcError(&model.FieldError{Field: "end", Value: end.UTC().Format(time.RFC3339), Allowed: "a time after now"})
	}
	res.Start, res.End = start, end
	return nil
}

// nodes expands req's node names and hostlists, or picks NodeCount Ready
// nodes free of other reservations during res (idle ones first, then by
// name).
func (r *reservationService) nodes(req *latticev1.CreateReservationRequest, res *model.Reservation) ([]string, error) {
	if len(req.Nodes) > 0 && req.NodeCount > 0 {
		return nil, invalid("invalid nodes: give node names (--nodes) or a count (--count), not both")
	}
	if len(req.Nodes) > 0 {
		var out []string
		for _, expr := range req.Nodes {
			names, err := model.ExpandHostlist(expr)
			if err != nil {
				return nil, rpcError(err)
			}
			out = append(out, names...)
			if len(out) > model.MaxReservationNodes {
				return nil, invalid("invalid nodes: more than %d", model.MaxReservationNodes)
			}
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	if req.NodeCount <= 0 {
		return nil, invalid("invalid nodes: allowed node names or a hostlist (--nodes n[01-04]), or a count (--count N)")
	}
	var idle, busy []string
	var ready int
	r.s.view(func(st *quorum.State) {
		others := st.Reservations(time.Time{})
		for _, n := range st.NodesShared() {
			if n.State != model.NodeReady {
				continue
			}
			ready++
			probe := model.Reservation{Name: res.Name, Nodes: []string{n.Name}, Start: res.Start, End: res.End}
			if slices.ContainsFunc(others, func(o *model.Reservation) bool { return o.Name != res.Name && probe.Overlaps(o) }) {
				continue
			}
			if n.Allocation == 0 {
				idle = append(idle, n.Name)
			} else {
				busy = append(busy, n.Name)
			}
		}
	})
	all := append(idle, busy...)
	if int(req.NodeCount) > len(all) {
		return nil, status.Errorf(codes.FailedPrecondition, "invalid count %d: only %d Ready node(s) are free of other reservations then (%d Ready in all)", req.NodeCount, len(all), ready)
	}
	out := all[:req.NodeCount]
	slices.Sort(out)
	return out, nil
}

// defaultName is Slurm's: the creator's name and a number.
func (r *reservationService) defaultName(user string) string {
	if user == "" {
		user = "resv"
	}
	var taken []string
	r.s.view(func(st *quorum.State) {
		for _, o := range st.Reservations(time.Time{}) {
			taken = append(taken, o.Name)
		}
	})
	for i := 1; ; i++ {
		if n := fmt.Sprintf("%s_%d", user, i); !slices.Contains(taken, n) {
			return n
		}
	}
}

func (r *reservationService) set(ctx context.Context, res *model.Reservation, update bool, now time.Time) (*latticev1.NodeReservation, error) {
	if err := res.Validate(); err != nil {
		return nil, rpcError(err)
	}
	out, err := r.s.propose(ctx, &quorum.SetReservation{Reservation: *res, Update: update})
	if err != nil {
		return nil, rpcError(err)
	}
	if out.Rejection != nil {
		return nil, rejectionError(out.Rejection)
	}
	var got *model.Reservation
	r.s.view(func(st *quorum.State) { got = st.Reservation(res.Name) })
	if got == nil {
		got = res
	}
	return reservationToProto(got, now), nil
}

func (r *reservationService) DeleteReservation(ctx context.Context, req *latticev1.DeleteReservationRequest) (*latticev1.DeleteReservationResponse, error) {
	if req.Name == "" {
		return nil, invalid("invalid name: allowed the name of a reservation (latticectl reservation list)")
	}
	out, err := r.s.propose(ctx, &quorum.DeleteReservation{Name: req.Name})
	if err != nil {
		return nil, rpcError(err)
	}
	if out.Rejection != nil {
		return nil, rejectionError(out.Rejection)
	}
	return &latticev1.DeleteReservationResponse{}, nil
}

func (r *reservationService) ListReservations(ctx context.Context, req *latticev1.ListReservationsRequest) (*latticev1.ListReservationsResponse, error) {
	now := r.s.cfg.Clock()
	resp := &latticev1.ListReservationsResponse{NowUnixMs: now.UnixMilli()}
	r.s.view(func(st *quorum.State) {
		for _, o := range st.Reservations(now) {
			if req.Name == "" || o.Name == req.Name {
				resp.Reservations = append(resp.Reservations, reservationToProto(o, now))
			}
		}
	})
	if req.Name != "" && len(resp.Reservations) == 0 {
		return nil, status.Errorf(codes.NotFound, "reservation %q does not exist", req.Name)
	}
	return resp, nil
}

func reservationToProto(o *model.Reservation, now time.Time) *latticev1.NodeReservation {
	return &latticev1.NodeReservation{
		Name: o.Name, Nodes: o.Nodes, StartUnixMs: o.Start.UnixMilli(), EndUnixMs: o.End.UnixMilli(),
		Users: o.Users, Tenants: o.Tenants, Maint: o.Maint, CreatedBy: o.CreatedBy,
		CreatedUnixMs: convert.UnixMS(o.CreatedAt), Active: o.ActiveAt(now),
	}
}

// admitReservation checks a submission's --reservation: it must exist,
// not be over, and admit the caller (one of its users or tenants, or an
// administrator).
func (s *Server) admitReservation(ctx context.Context, r *model.Request) error {
	if r.Reservation == "" {
		return nil
	}
	now := s.cfg.Clock()
	var res *model.Reservation
	var names []string
	s.view(func(st *quorum.State) {
		for _, o := range st.Reservations(now) {
			names = append(names, o.Name)
			if o.Name == r.Reservation {
				res = o
			}
		}
	})
	if res == nil {
		allowed := "none exists"
		if len(names) > 0 {
			allowed = "one of " + strings.Join(names, ", ")
		}
		return status.Errorf(codes.InvalidArgument, "invalid reservation %q: allowed %s (latticectl reservation list)", r.Reservation, allowed)
	}
	if s.isAdmin(ctx) {
		return nil
	}
	user := r.User
	if id := caller(ctx); id != nil {
		user = id.User
	}
	if !res.Admits(user, r.Tenant) {
		return status.Errorf(codes.PermissionDenied, "permission denied: %s (tenant %s) may not use reservation %q: it admits users [%s] and tenants [%s]",
			user, r.Tenant, res.Name, strings.Join(res.Users, ","), strings.Join(res.Tenants, ","))
	}
	return nil
}

// markReserved sets the reservation active at now on each node listed.
func markReserved(nodes []*latticev1.Node, resv []*model.Reservation, now time.Time) {
	for _, o := range resv {
		if !o.ActiveAt(now) {
			continue
		}
		for _, n := range nodes {
			if _, ok := slices.BinarySearch(o.Nodes, n.Name); ok {
				n.Reservation, n.ReservationMaint = o.Name, o.Maint
			}
		}
	}
}
