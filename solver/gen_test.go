package solver

import (
	"fmt"
	"math"
	"math/rand"
	"time"

	"github.com/latticehpc/lattice/model"
)

// genCfg describes a generated cluster and queue.
type genCfg struct {
	nodes, groups     int
	pending, running  int
	seed              int64
	fps               int     // conformance fingerprints (1 = homogeneous)
	gpuGroupFrac      float64 // share of groups with GPU nodes
	foreignFrac       float64 // share of nodes lent by other vClusters (idle)
	downFrac          float64 // share of nodes drained or down
	depth             int     // reservation depth
	powerHeadroom     int64   // < 0 unlimited
	sensitive         bool
	busyFrac          float64 // share of own nodes running work (default 0.93)
	maxJob            int     // largest job (default 1024)
	constrainedJobs   float64 // share of jobs with GPU or feature constraints
	elasticJobs       float64 // share of jobs with NodesMin < NodesMax
	tenants, quotaTen int
	// Drawn from a second random stream, so that inputs without them stay
	// as they were.
	alg           model.Algorithm
	lendLimitFrac float64 // share of foreign nodes lent only until a limit
	heldFrac      float64 // share of own nodes held for a job (Node.ReservedFor)
	ownOnlyJobs   float64 // share of jobs that may not borrow
}

// drawSize draws a job size like real HPC traces: many one-node jobs, a
// tail up to maxJob, powers of two favoured.
func drawSize(r *rand.Rand, maxJob int) int {
	var n int
	switch u := r.Float64(); {
	case u < 0.45:
		n = 1
	case u < 0.65:
		n = 2 + r.Intn(3)
	case u < 0.85:
		n = 5 + r.Intn(28)
	case u < 0.97:
		n = 33 + r.Intn(224)
	default:
		n = 257 + r.Intn(768)
	}
	if r.Intn(2) == 0 { // round up to a power of two
		p := 1
		for p < n {
			p <<= 1
		}
		n = p
	}
	return max(1, min(n, maxJob))
}

// drawWall draws a walltime log-uniformly between 5 minutes and 48 hours,
// in whole minutes.
func drawWall(r *rand.Rand) time.Duration {
	lo, hi := 5.0, 48*60.0
	m := lo * math.Pow(hi/lo, r.Float64())
	return time.Duration(int(m)) * time.Minute
}

// genInput generates one realistic cycle's input.
func genInput(cfg genCfg) *Input {
	r := rand.New(rand.NewSource(cfg.seed))
	if cfg.fps <= 0 {
		cfg.fps = 1
	}
	if cfg.busyFrac == 0 {
		cfg.busyFrac = 0.93
	}
	if cfg.maxJob == 0 {
		cfg.maxJob = 1024
	}
	if cfg.tenants == 0 {
		cfg.tenants = 40
	}
	in := &Input{
		Now: t0, VCluster: "batch", Type: model.TypeHPCBatch,
		ReservationDepth: cfg.depth, Groups: cfg.groups,
		PowerHeadroomWatts: cfg.powerHeadroom, EnergyPrice: r.Float64(),
		Tenants: make(map[string]Tenant, cfg.tenants),
	}
	if cfg.sensitive {
		in.Type = model.TypeSensitive
	}
	in.Weights, _ = Profile(DefaultProfile)
	perGroup := (cfg.nodes + cfg.groups - 1) / cfg.groups
	gpuGroups := int(float64(cfg.groups) * cfg.gpuGroupFrac)
	foreignFrom := cfg.nodes - int(float64(cfg.nodes)*cfg.foreignFrac)
	in.Nodes = make([]Node, cfg.nodes)
	for i := range in.Nodes {
		g := i / perGroup
		n := &in.Nodes[i]
		*n = Node{
			Name: fmt.Sprintf("n%05d", i), Group: g,
			Fingerprint: fmt.Sprintf("fp%d", g%cfg.fps),
			IdleWatts:   90 + r.Intn(20), BusyWatts: 350 + r.Intn(100),
			State: model.NodeReady, Own: i < foreignFrom,
		}
		if r.Intn(20) == 0 {
			n.Fingerprint = fmt.Sprintf("fp%d", r.Intn(cfg.fps))
		}
		if g < gpuGroups {
			n.GPUType, n.GPUs = "a100", 4
			n.BusyWatts += 1200
		}
		if r.Intn(5) == 0 {
			n.Features = []string{"highmem"}
		}
		if r.Float64() < cfg.downFrac {
			n.State = []model.NodeState{model.NodeDrained, model.NodeDown, model.NodeDegraded}[r.Intn(3)]
		}
	}

	// Running work on a random permutation of own nodes (a busy, fragmented machine).
	perm := r.Perm(foreignFrom)
	budget := int(float64(foreignFrom) * cfg.busyFrac)
	used := 0
	for k := 0; k < cfg.running; k++ {
		room := budget - used - (cfg.running - k - 1)
		if room < 1 {
			break
		}
		size := min(drawSize(r, cfg.maxJob), room)
		wall := drawWall(r)
		start := t0.Add(-time.Duration(r.Int63n(int64(wall))))
		id := uint64(1_000_000 + k)
		for _, x := range perm[used : used+size] {
			in.Nodes[x].Allocation = id
			in.Nodes[x].FreeAt = start.Add(wall)
		}
		used += size
		in.Running = append(in.Running, Running{ID: id, Tenant: fmt.Sprintf("t%02d", r.Intn(cfg.tenants)),
			Nodes: size, Start: start, End: start.Add(wall)})
	}
	// Busy nodes of other vClusters are never offered as borrowable.
	for i := foreignFrom; i < cfg.nodes; i++ {
		if r.Intn(10) == 0 {
			in.Nodes[i].Allocation, in.Nodes[i].FreeAt = 5, t0.Add(time.Hour)
		}
	}

	for k := 0; k < cfg.tenants; k++ {
		t := Tenant{FairShareTarget: 1 / float64(cfg.tenants), UsageShare: r.Float64() * 2 / float64(cfg.tenants),
			NodesLeft: -1, RunningLeft: -1}
		if k < cfg.quotaTen {
			t.NodesLeft, t.RunningLeft = 16+r.Intn(512), 2+r.Intn(100)
		}
		in.Tenants[fmt.Sprintf("t%02d", k)] = t
	}
	in.Pending = make([]Job, cfg.pending)
	for k := range in.Pending {
		size := drawSize(r, min(cfg.maxJob, cfg.nodes/2))
		j := Job{
			ID: uint64(k + 1), Tenant: fmt.Sprintf("t%02d", r.Intn(cfg.tenants+2)), // a few unknown tenants
			NodesMin: size, NodesMax: size, Walltime: drawWall(r),
			SubmitTime:      t0.Add(-time.Duration(r.ExpFloat64() * float64(6*time.Hour))),
			HotDataFraction: -1,
		}
		if r.Intn(10) == 0 {
			j.PriorityClass = 1 + r.Intn(10)
		}
		if r.Intn(5) == 0 {
			j.EligibleTime = j.SubmitTime.Add(time.Duration(r.Int63n(int64(t0.Sub(j.SubmitTime)) + 1)))
		}
		if r.Float64() < cfg.elasticJobs {
			j.NodesMax = size * 2
		}
		if r.Float64() < cfg.constrainedJobs {
			switch r.Intn(3) {
			case 0:
				j.GPUType, j.GPUsPerNode = "a100", 4
			case 1:
				j.Constraints = []string{"highmem"}
			default:
				j.GPUType = "a100"
				j.Constraints = []string{"highmem"}
			}
		}
		if r.Intn(4) == 0 {
			j.Checkpoint, j.CheckpointMinutes = model.CheckpointSignal, float64(r.Intn(20))
		}
		if r.Intn(3) == 0 {
			j.HotDataFraction = r.Float64()
		}
		if r.Intn(50) == 0 {
			j.Hold = "JobArrayTaskLimit"
		}
		in.Pending[k] = j
	}
	in.Algorithm = cfg.alg
	if cfg.lendLimitFrac > 0 || cfg.heldFrac > 0 || cfg.ownOnlyJobs > 0 {
		r2 := rand.New(rand.NewSource(cfg.seed ^ 0x5eed))
		for i := range in.Nodes {
			n := &in.Nodes[i]
			switch {
			case !n.Own && r2.Float64() < cfg.lendLimitFrac:
				n.LendUntil = t0.Add(time.Duration(r2.Int63n(int64(6*time.Hour))) - 10*time.Minute)
			case n.Own && r2.Float64() < cfg.heldFrac:
				n.ReservedFor = uint64(1 + r2.Intn(len(in.Pending)+3)) // sometimes no pending job
				n.ReservedUntil = t0.Add(time.Duration(r2.Int63n(int64(time.Hour))) - 5*time.Minute)
			}
		}
		for k := range in.Pending {
			in.Pending[k].OwnNodesOnly = r2.Float64() < cfg.ownOnlyJobs
		}
	}
	return in
}
