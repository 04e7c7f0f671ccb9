package model

// Usage is what a run used on its nodes, measured by its agent from the
// run's cgroup (Slurm's TotalCPU, UserCPU, SystemCPU, MaxRSS,
// ConsumedEnergy).
type Usage struct {
	UserCPUSeconds   float64 `json:"user_cpu_seconds,omitempty"`
	SystemCPUSeconds float64 `json:"system_cpu_seconds,omitempty"`
	MaxRSSBytes      int64   `json:"max_rss_bytes,omitempty"`
	// MaxRSSSampled: no cgroup kept the peak; MaxRSSBytes is the largest
	// of the agent's samples.
	MaxRSSSampled bool    `json:"max_rss_sampled,omitempty"`
	EnergyJoules  float64 `json:"consumed_energy_joules,omitempty"`
	// EnergySource is EnergyRAPL or EnergyModel ("" without a figure).
	EnergySource string `json:"energy_source,omitempty"`
	OOMKills     int64  `json:"oom_kills,omitempty"`
}

// Where an energy figure comes from.
const (
	EnergyRAPL  = "rapl"  // measured: the node's RAPL counters over the run
	EnergyModel = "model" // estimated: the node's configured busy draw x elapsed
)

// TotalCPUSeconds is user + system time.
func (u *Usage) TotalCPUSeconds() float64 { return u.UserCPUSeconds + u.SystemCPUSeconds }

// PlusEarlierRuns is what a requeued allocation used over all its runs:
// u, its latest run's usage, with earlier, the sum of its earlier runs'
// (Allocation.Usage when the run ended): CPU times, energy and OOM kills
// added, the largest peak. Either may be nil.
func (u *Usage) PlusEarlierRuns(earlier *Usage) *Usage {
	switch {
	case earlier == nil:
		return u
	case u == nil:
		c := *earlier
		return &c
	}
	s := *u
	s.UserCPUSeconds += earlier.UserCPUSeconds
	s.SystemCPUSeconds += earlier.SystemCPUSeconds
	s.EnergyJoules += earlier.EnergyJoules
	s.OOMKills += earlier.OOMKills
	if earlier.MaxRSSBytes > s.MaxRSSBytes {
		s.MaxRSSBytes, s.MaxRSSSampled = earlier.MaxRSSBytes, earlier.MaxRSSSampled
	}
	if s.EnergySource == "" {
		s.EnergySource = earlier.EnergySource
	} else if earlier.EnergySource != "" && earlier.EnergySource != s.EnergySource {
		s.EnergySource = EnergyModel // part of it estimated
	}
	return &s
}
