package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

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

// MaxMemoryMB bounds --mem and --mem-per-cpu (1 PiB).
const MaxMemoryMB = 1 << 30

// ParseMemoryMB reads a Slurm memory size: a number with an optional unit
// suffix K, M, G or T (powers of 1024; a plain number is MB), e.g. 100M,
// 4G, 2048. It returns megabytes, rounding kilobytes up.
func ParseMemoryMB(field, s string) (int64, error) {
	v := strings.TrimSpace(s)
	bad := fieldErr(field, s, "a size in MB, or with a unit suffix K, M, G or T (e.g. 100M, 4G)")
	if v == "" {
		return 0, bad
	}
	mult := 1.0
	switch strings.ToUpper(v[len(v)-1:]) {
	case "K":
		mult = 1.0 / 1024
	case "M":
	case "G":
		mult = 1024
	case "T":
		mult = 1024 * 1024
	default:
		if v[len(v)-1] < '0' || v[len(v)-1] > '9' {
			return 0, bad
		}
		v += "M"
	}
	n, err := strconv.ParseFloat(v[:len(v)-1], 64)
	if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, bad
	}
	mb := int64(math.Ceil(n * mult))
	if mb > MaxMemoryMB {
		return 0, fieldErr(field, s, fmt.Sprintf("at most %d MB", MaxMemoryMB))
	}
	return mb, nil
}

// MemoryLimitBytes is the memory limit of a job on a node with cpus CPUs:
// the larger of --mem and --mem-per-cpu x cpus (0 = no limit).
func (r *Request) MemoryLimitBytes(cpus int) int64 {
	mb := r.MemPerNodeMB
	if r.MemPerCPUMB > 0 && cpus > 0 {
		mb = max(mb, r.MemPerCPUMB*int64(cpus))
	}
	return mb << 20
}

// checkMemory: sizes in range, and not both --mem and --mem-per-cpu
// (Slurm refuses that too).
func (r *Request) checkMemory() error {
	for _, f := range []struct {
		name string
		mb   int64
	}{{"mem", r.MemPerNodeMB}, {"mem-per-cpu", r.MemPerCPUMB}} {
		if f.mb < 0 || f.mb > MaxMemoryMB {
			return fieldErr(f.name, strconv.FormatInt(f.mb, 10), fmt.Sprintf("0 to %d MB", MaxMemoryMB))
		}
	}
	if r.MemPerNodeMB > 0 && r.MemPerCPUMB > 0 {
		return fieldErr("mem-per-cpu", strconv.FormatInt(r.MemPerCPUMB, 10), "unset when --mem is set (they are mutually exclusive)")
	}
	return nil
}
