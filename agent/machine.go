package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latticehpc/lattice/conformance"
)

// MachineFacts are what a node is, read from the machine (Linux /proc and
// /sys under Root). A fact that cannot be read is empty.
type MachineFacts struct {
	KernelRelease string
	KernelCmdline string
	BIOS          string // vendor, version, date and board, from /sys/class/dmi/id
	GPUDriver     string // loaded nvidia or amdgpu module version
	NICFirmware   string // firmware of the InfiniBand/RDMA devices, sorted
}

// FingerprintInputs overrides machine facts in the fingerprint; an empty
// field keeps the machine's.
type FingerprintInputs struct {
	DriverVersion, NICFirmware, BIOSFirmware, KernelParams string
}

func readTrim(root, path string) string {
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ReadMachine reads the facts of the machine whose filesystem is at root
// ("/" for this host).
func ReadMachine(root string) MachineFacts {
	m := MachineFacts{
		KernelRelease: readTrim(root, "proc/sys/kernel/osrelease"),
		KernelCmdline: readTrim(root, "proc/cmdline"),
	}
	var bios []string
	for _, f := range []string{"bios_vendor", "bios_version", "bios_date", "board_name", "board_version"} {
		if v := readTrim(root, "sys/class/dmi/id/"+f); v != "" {
			bios = append(bios, f+"="+v)
		}
	}
	m.BIOS = strings.Join(bios, ";")
	for _, mod := range []string{"nvidia", "amdgpu"} {
		if v := readTrim(root, "sys/module/"+mod+"/version"); v != "" {
			m.GPUDriver = mod + "=" + v
			break
		}
	}
	var nics []string
	devs, _ := filepath.Glob(filepath.Join(root, "sys/class/infiniband/*/fw_ver"))
	for _, d := range devs {
		if v := readTrim("", d); v != "" {
			nics = append(nics, filepath.Base(filepath.Dir(d))+"="+v)
		}
	}
	sort.Strings(nics)
	m.NICFirmware = strings.Join(nics, ";")
	return m
}

// Fingerprint is the conformance fingerprint of the machine: GPU driver,
// NIC firmware, BIOS/firmware, and the kernel (release and command line),
// each replaced by its override when one is given.
func (m MachineFacts) Fingerprint(o FingerprintInputs) string {
	pick := func(override, fact string) string {
		if override != "" {
			return override
		}
		return fact
	}
	params := o.KernelParams
	if params == "" {
		params = m.KernelCmdline
		if m.KernelRelease != "" {
			params += " kernel.release=" + m.KernelRelease
		}
	}
	return conformance.Fingerprint(pick(o.DriverVersion, m.GPUDriver), pick(o.NICFirmware, m.NICFirmware), pick(o.BIOSFirmware, m.BIOS), params)
}

// PowerMeter measures a machine's power draw from the RAPL/powercap
// energy counters (package domains: intel-rapl:N, amd-rapl:N): the energy
// used between two readings over the time between them.
type PowerMeter struct {
	root string
	mu   sync.Mutex
	last map[string]uint64
	at   time.Time
	// GPUs, when set, reads the GPUs' draw (watts now; false when it cannot
	// be read), added to the CPU packages' (NewPowerMeter sets it to
	// nvidia-smi's where that tool exists).
	GPUs func() (int, bool)
}

var raplDomain = regexp.MustCompile(`^(intel|amd)-rapl:[0-9]+$`)

// NewPowerMeter returns a meter over root's /sys/class/powercap, or an
// error saying why there is nothing to measure.
func NewPowerMeter(root string) (*PowerMeter, error) {
	p := &PowerMeter{root: root}
	if len(p.domains()) == 0 {
		return nil, fmt.Errorf("no RAPL package domain under %s (no powercap driver, or not readable)", filepath.Join(root, "sys/class/powercap"))
	}
	if path, err := exec.LookPath("nvidia-smi"); err == nil && (root == "/" || root == "") {
		p.GPUs = func() (int, bool) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, path, "--query-gpu=power.draw", "--format=csv,noheader,nounits").Output()
			if err != nil {
				return 0, false
			}
			return parseGPUPower(string(out))
		}
	}
	return p, nil
}

// parseGPUPower sums `nvidia-smi --query-gpu=power.draw
// --format=csv,noheader,nounits`: one figure in watts a GPU ("[N/A]" for a
// GPU that does not say).
func parseGPUPower(out string) (int, bool) {
	var sum float64
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if v, err := strconv.ParseFloat(strings.TrimSpace(line), 64); err == nil && v >= 0 {
			sum += v
			n++
		}
	}
	return int(sum + 0.5), n > 0
}

func (p *PowerMeter) domains() []string {
	dir := filepath.Join(p.root, "sys/class/powercap")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if raplDomain.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "energy_uj")); err == nil {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// Watts reads the counters at now and returns the average draw since the
// previous reading (false on the first reading, or when nothing was read).
func (p *PowerMeter) Watts(now time.Time) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := map[string]uint64{}
	for _, d := range p.domains() {
		if v, err := strconv.ParseUint(readTrim("", filepath.Join(d, "energy_uj")), 10, 64); err == nil {
			cur[d] = v
		}
	}
	prev, prevAt := p.last, p.at
	p.last, p.at = cur, now
	dt := now.Sub(prevAt).Seconds()
	if prev == nil || dt <= 0 || len(cur) == 0 {
		return 0, false
	}
	var uj float64
	for d, v := range cur {
		old, ok := prev[d]
		if !ok {
			continue
		}
		if v < old { // the counter wrapped at max_energy_range_uj
			maxRange, _ := strconv.ParseUint(readTrim("", filepath.Join(d, "max_energy_range_uj")), 10, 64)
			v += maxRange
		}
		uj += float64(v - old)
	}
	w := int(uj/1e6/dt + 0.5)
	if p.GPUs != nil {
		if g, ok := p.GPUs(); ok {
			w += g
		}
	}
	return w, true
}

// Changed names the fingerprint inputs that differ between m and old,
// leaving out those an override pins.
func (m MachineFacts) Changed(old MachineFacts, o FingerprintInputs) []string {
	var out []string
	add := func(name, now, was, override string) {
		if override == "" && now != was {
			out = append(out, fmt.Sprintf("%s %q → %q", name, was, now))
		}
	}
	add("GPU driver", m.GPUDriver, old.GPUDriver, o.DriverVersion)
	add("NIC firmware", m.NICFirmware, old.NICFirmware, o.NICFirmware)
	add("BIOS", m.BIOS, old.BIOS, o.BIOSFirmware)
	add("kernel release", m.KernelRelease, old.KernelRelease, o.KernelParams)
	add("kernel command line", m.KernelCmdline, old.KernelCmdline, o.KernelParams)
	return out
}

// Hardware is what a node offers, as detected on the machine.
type Hardware struct {
	CPUs     int
	MemoryMB int64
	GPUType  string
	GPUs     int
}

// ReadHardware reads the CPU count (/proc/cpuinfo; this process's CPUs
// when that cannot be read on this host) and memory (/proc/meminfo) of the
// machine whose filesystem is at root.
func ReadHardware(root string) Hardware {
	var h Hardware
	if b, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "processor" {
				h.CPUs++
			}
		}
	}
	if h.CPUs == 0 && (root == "/" || root == "") {
		h.CPUs = runtime.NumCPU()
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if len(f) >= 1 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						h.MemoryMB = kb / 1024
					}
				}
			}
		}
	}
	return h
}

// DetectGPUs asks nvidia-smi, then rocm-smi, for the GPUs of this host:
// their model (of the first) and count. No tool, or a tool that fails
// (no driver loaded), gives none and says why.
func DetectGPUs(ctx context.Context) (gpuType string, n int, why string) {
	var notes []string
	for _, tool := range []struct {
		name  string
		args  []string
		parse func(string) (string, int)
	}{
		{"nvidia-smi", []string{"--query-gpu=name", "--format=csv,noheader"}, parseNvidiaSMI},
		{"rocm-smi", []string{"--showproductname", "--csv"}, parseRocmSMI},
	} {
		path, err := exec.LookPath(tool.name)
		if err != nil {
			notes = append(notes, tool.name+" not found")
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(cctx, path, tool.args...).Output()
		cancel()
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s failed: %v", tool.name, err))
			continue
		}
		if t, k := tool.parse(string(out)); k > 0 {
			return t, k, ""
		}
		notes = append(notes, tool.name+" lists no GPU")
	}
	return "", 0, strings.Join(notes, "; ")
}

// parseNvidiaSMI reads `nvidia-smi --query-gpu=name --format=csv,noheader`:
// one GPU name a line.
func parseNvidiaSMI(out string) (string, int) {
	var first string
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if first == "" {
			first = line
		}
		n++
	}
	return first, n
}

// parseRocmSMI reads `rocm-smi --showproductname --csv`: a header line
// (device,Card series,Card model,...) then one line per card ("card0,...").
func parseRocmSMI(out string) (string, int) {
	lines := strings.Split(out, "\n")
	col := -1
	var first string
	n := 0
	for _, line := range lines {
		line = strings.TrimSpace(line)
		fields := strings.Split(line, ",")
		if col < 0 {
			for i, f := range fields {
				if strings.EqualFold(strings.TrimSpace(f), "Card series") {
					col = i
				}
			}
			if col >= 0 {
				continue
			}
		}
		if !strings.HasPrefix(line, "card") {
			continue
		}
		n++
		if first == "" && col >= 0 && col < len(fields) {
			first = strings.TrimSpace(fields[col])
		}
	}
	return first, n
}
