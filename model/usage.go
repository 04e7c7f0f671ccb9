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
