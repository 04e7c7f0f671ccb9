package solver

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// TestPropertyHeadNeverStarves simulates cycles on random clusters where
// jobs run exactly their walltime and new jobs keep arriving, some of them
// scoring far above the oldest job (light tenants, one-group shapes). With
// reservations on, the oldest job's reservation must never move later from
// one cycle to the next, and it must start by the time of its first one.
func TestPropertyHeadNeverStarves(t *testing.T) {
	cycles := 0
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		nodes := groups(4+r.Intn(8), 4+r.Intn(8), 4+r.Intn(8))
		for i := range nodes { // a busy machine
			if r.Intn(10) < 7 {
				nodes[i].Allocation, nodes[i].FreeAt = 999, t0.Add(time.Duration(10+r.Intn(170))*time.Minute)
			}
		}
		in := &Input{Now: t0, Type: model.TypeHPCBatch, ReservationDepth: []int{1, 2, model.ReservationsAll}[r.Intn(3)],
			Nodes: nodes, PowerHeadroomWatts: -1, EnergyPrice: -1, Tenants: map[string]Tenant{
				"heavy": {FairShareTarget: 0.5, UsageShare: 1, NodesLeft: -1, RunningLeft: -1},
				"light": {FairShareTarget: 0.5, UsageShare: 0, NodesLeft: -1, RunningLeft: -1},
			}}
		in.Weights, _ = Profile(DefaultProfile)
		total := len(nodes)
		nextID := uint64(1)
		newJob := func(tenant string, size int) Job {
			j := Job{ID: nextID, Tenant: tenant, NodesMin: size, NodesMax: size,
				Walltime: time.Duration(10+r.Intn(120)) * time.Minute, SubmitTime: in.Now, HotDataFraction: -1}
			nextID++
			return j
		}
		// The oldest job: large, of the heavy tenant (low f3, low f4).
		in.Pending = append(in.Pending, newJob("heavy", total-r.Intn(3)))
		oldest := in.Pending[0].ID
		in.Now = in.Now.Add(time.Minute)
		for i := 0; i < 6; i++ {
			in.Pending = append(in.Pending, newJob("light", 1+r.Intn(4)))
		}
		var first, last time.Time
		started := false
		for cycle := 0; cycle < 200 && !started; cycle++ {
			p := Solve(in)
			if err := validatePlan(in, p); err != nil {
				t.Fatalf("seed %d cycle %d: %v", seed, cycle, err)
			}
			// Apply the starts.
			byName := map[string]int{}
			for i, n := range in.Nodes {
				byName[n.Name] = i
			}
			keep := in.Pending[:0]
			startedIDs := map[uint64]bool{}
			for _, st := range p.Starts {
				startedIDs[st.JobID] = true
			}
			for _, j := range in.Pending {
				if !startedIDs[j.ID] {
					keep = append(keep, j)
					continue
				}
				for _, st := range p.Starts {
					if st.JobID == j.ID {
						for _, name := range st.Nodes {
							n := &in.Nodes[byName[name]]
							n.Allocation, n.FreeAt = j.ID, in.Now.Add(j.Walltime)
						}
					}
				}
				if j.ID == oldest {
					started = true
					if !first.IsZero() && in.Now.After(first) {
						t.Fatalf("seed %d: oldest job started at %v, after its first reservation %v", seed, in.Now, first)
					}
				}
			}
			in.Pending = keep
			if !started {
				res := p.reservation(oldest)
				if res == nil {
					t.Fatalf("seed %d cycle %d: the oldest job has no reservation (%q)", seed, cycle, p.explain(oldest).Reason)
				}
				if first.IsZero() {
					first = res.Start
				}
				if !last.IsZero() && res.Start.After(last) {
					t.Fatalf("seed %d cycle %d: the oldest job's reservation moved from %v to %v", seed, cycle, last, res.Start)
				}
				last = res.Start
			}
			// Advance to the next job end, or a few minutes; free nodes.
			next := in.Now.Add(time.Duration(1+r.Intn(15)) * time.Minute)
			for _, n := range in.Nodes {
				if n.Allocation != 0 && n.FreeAt.Before(next) {
					next = n.FreeAt
				}
			}
			in.Now = next
			for i := range in.Nodes {
				if n := &in.Nodes[i]; n.Allocation != 0 && !n.FreeAt.After(in.Now) {
					n.Allocation, n.FreeAt = 0, time.Time{}
				}
			}
			for k := r.Intn(4); k > 0; k-- {
				in.Pending = append(in.Pending, newJob([]string{"light", "heavy"}[r.Intn(2)], 1+r.Intn(6)))
			}
		}
		if !started {
			t.Fatalf("seed %d: the oldest job never started", seed)
		}
		cycles += len(in.Pending)
	}
	if cycles == 0 {
		t.Fatal("nothing was simulated")
	}
}

// TestProtectedJobReserved: with depth 1 the head takes the only
// reservation; a protected job gets one too, and no job decided after it
// starts on its reserved nodes.
func TestProtectedJobReserved(t *testing.T) {
	for _, protected := range []bool{false, true} {
		nodes := groups(6)
		for i := 2; i < 6; i++ { // n0, n1 free; the rest busy for an hour
			nodes[i].Allocation, nodes[i].FreeAt = 99, t0.Add(time.Hour)
		}
		in := &Input{Now: t0, Type: model.TypeHPCBatch, ReservationDepth: 1, Nodes: nodes,
			PowerHeadroomWatts: -1, EnergyPrice: -1}
		in.Weights, _ = Profile(DefaultProfile)
		head := jobN(1, 4).wall(2 * time.Hour).waited(3 * time.Hour).build()
		starving := jobN(2, 3).wall(2 * time.Hour).waited(2 * time.Hour).build()
		starving.Protected = protected
		late := jobN(3, 2).wall(10 * time.Hour).waited(time.Minute).build()
		in.Pending = []Job{head, starving, late}
		p := Solve(in)
		if err := validatePlan(in, p); err != nil {
			t.Fatal(err)
		}
		var res *Reservation
		for i := range p.Reservations {
			if p.Reservations[i].JobID == 2 {
				res = &p.Reservations[i]
			}
		}
		if !protected {
			if res != nil {
				t.Errorf("unprotected: job 2 reserved at %v, want no reservation (depth 1 is the head's)", res.Start)
			}
			continue
		}
		if res == nil {
			t.Fatalf("protected: job 2 has no reservation; plan %+v", p.Reservations)
		}
		for _, st := range p.Starts {
			for _, n := range st.Nodes {
				if slices.Contains(res.Nodes, n) && st.JobID != 2 {
					t.Errorf("job %d started on %s, reserved for protected job 2 from %v", st.JobID, n, res.Start)
				}
			}
		}
	}
}

// TestProtectedFirst: a protected job that fits now but would end after the
// head's reservation waits behind the head when protected jobs are decided
// after it, and starts now — the head's reservation made around it — when
// they are decided first (Input.ProtectedFirst).
func TestProtectedFirst(t *testing.T) {
	for _, first := range []bool{false, true} {
		nodes := groups(6)
		for i := 2; i < 6; i++ { // n0, n1 free; the rest busy for an hour
			nodes[i].Allocation, nodes[i].FreeAt = 99, t0.Add(time.Hour)
		}
		in := &Input{Now: t0, Type: model.TypeHPCBatch, ReservationDepth: 1, Nodes: nodes,
			PowerHeadroomWatts: -1, EnergyPrice: -1, ProtectedFirst: first}
		in.Weights, _ = Profile(DefaultProfile)
		head := jobN(1, 6).wall(2 * time.Hour).waited(3 * time.Hour).build()
		short := jobN(2, 1).wall(2 * time.Hour).waited(2 * time.Hour).build()
		short.Protected = true
		in.Pending = []Job{head, short}
		p := Solve(in)
		if err := validatePlan(in, p); err != nil {
			t.Fatal(err)
		}
		started := p.start(2) != nil
		var headAt time.Time
		for _, r := range p.Reservations {
			if r.JobID == 1 {
				headAt = r.Start
			}
		}
		switch {
		case !first && (started || !headAt.Equal(t0.Add(time.Hour))):
			t.Errorf("after the head: job 2 started %v, head reserved at %v; want waiting, head at +1h", started, headAt)
		case first && (!started || !headAt.Equal(t0.Add(2*time.Hour))):
			t.Errorf("first: job 2 started %v, head reserved at %v; want started, head at +2h", started, headAt)
		}
	}
}
