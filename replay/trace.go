package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
)

// Job is one job of a trace in the simulator's model. Times are offsets from
// the trace's epoch (its first submit is usually 0).
type Job struct {
	// ID is the job number in the trace.
	ID     uint64
	Submit time.Duration
	// Runtime is what the job really runs in the simulation; Estimate is the
	// walltime the schedulers see. Estimate >= Runtime.
	Runtime  time.Duration
	Estimate time.Duration
	// Size is the number of nodes (one SWF processor is one node).
	Size   int
	Tenant string
	// VCluster is the partition the job is submitted to ("" = the first).
	VCluster          string
	PriorityClass     int
	Checkpoint        model.CheckpointMode
	CheckpointMinutes float64
	// DependsOn lists trace job numbers that must end before this job is
	// eligible (a DAG edge; the simulation has no failures, so afterok and
	// afterany coincide).
	DependsOn []uint64
	// Service marks an instance of a service load (service.go): it runs,
	// but the metrics leave it out.
	Service bool
}

// VClusterSpec is a partition of the simulated machine (JSON traces).
type VClusterSpec struct {
	Name string `json:"name"`
	// Nodes is how many nodes it owns; nodes are split in declaration order.
	Nodes          int                `json:"nodes"`
	Type           model.VClusterType `json:"type,omitempty"`
	WeightsProfile string             `json:"weights_profile,omitempty"`
	// ReservationDepth: 0 = the replay's --reservation-depth; -1 = all.
	ReservationDepth int  `json:"reservation_depth,omitempty"`
	AllowLending     bool `json:"allow_lending,omitempty"`
	AllowBorrowing   bool `json:"allow_borrowing,omitempty"`
}

// TenantSpec is a tenant's contract (JSON traces).
type TenantSpec struct {
	Name            string  `json:"name"`
	FairShareTarget float64 `json:"fair_share_target,omitempty"`
	MaxNodes        int     `json:"max_nodes,omitempty"`
	MaxRunning      int     `json:"max_running,omitempty"`
}

// Trace is a workload ready to replay.
type Trace struct {
	Name string
	// Capacity is the number of nodes of the simulated machine.
	Capacity int
	// Jobs sorted by submit time, then job number.
	Jobs []Job
	// Skipped counts malformed lines skipped in lenient mode; Dropped counts
	// well-formed jobs the job model drops (size <= 0, runtime < 0, larger
	// than the machine).
	Skipped int
	Dropped int
	// VClusters and Tenants come from JSON traces; empty for SWF (one
	// vCluster over the whole machine, equal fair-share targets).
	VClusters []VClusterSpec
	Tenants   []TenantSpec
}

// ReadOptions tune the trace readers.
type ReadOptions struct {
	// Lenient skips malformed lines (counted in Trace.Skipped) instead of
	// failing on the first one.
	Lenient bool
}

// ReadFile reads a trace: JSON when the name ends in .json (optionally .gz),
// SWF otherwise. Gzip is recognised by its magic bytes.
func ReadFile(path string, opt ReadOptions) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace %s: gzip: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	name := strings.TrimSuffix(filepath.Base(path), ".gz")
	var tr *Trace
	if strings.HasSuffix(strings.ToLower(name), ".json") {
		tr, err = ReadJSON(r)
	} else {
		tr, err = ReadSWF(r, opt)
	}
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	tr.Name = name
	return tr, nil
}

// sortJobs orders jobs by submit time, then job number — the baselines'
// queue order.
func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if a.Submit != b.Submit {
			if a.Submit < b.Submit {
				return -1
			}
			return 1
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// First returns a copy of the trace cut to its first n jobs (in submit
// order); n <= 0 keeps all. Dependencies on dropped jobs are removed.
func (t *Trace) First(n int) *Trace {
	if n <= 0 || n >= len(t.Jobs) {
		return t
	}
	c := *t
	c.Jobs = slices.Clone(t.Jobs[:n])
	kept := make(map[uint64]bool, n)
	for _, j := range c.Jobs {
		kept[j.ID] = true
	}
	for i := range c.Jobs {
		if deps := c.Jobs[i].DependsOn; len(deps) > 0 {
			c.Jobs[i].DependsOn = slices.DeleteFunc(slices.Clone(deps), func(id uint64) bool { return !kept[id] })
		}
	}
	return &c
}

// OfferedLoad is the work the trace submits per unit of capacity over its
// submission span: Σ size · runtime / (capacity · (last submit − first
// submit)); 0 when the span or the capacity is 0. Above 1 the trace is
// overloaded: its queue grows for as long as it submits, whatever the
// policy, and the utilization of its whole run depends on which jobs a
// policy leaves for the end (docs/quality.md).
func (t *Trace) OfferedLoad() float64 {
	if len(t.Jobs) == 0 || t.Capacity <= 0 {
		return 0
	}
	first, last := t.Jobs[0].Submit, t.Jobs[0].Submit
	var work float64
	for _, j := range t.Jobs {
		first, last = min(first, j.Submit), max(last, j.Submit)
		work += float64(j.Size) * j.Runtime.Seconds()
	}
	if last <= first {
		return 0
	}
	return work / (float64(t.Capacity) * (last - first).Seconds())
}
