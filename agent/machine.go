package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
}

var raplDomain = regexp.MustCompile(`^(intel|amd)-rapl:[0-9]+$`)

// NewPowerMeter returns a meter over root's /sys/class/powercap, or an
// error saying why there is nothing to measure.
func NewPowerMeter(root string) (*PowerMeter, error) {
	p := &PowerMeter{root: root}
	if len(p.domains()) == 0 {
		return nil, fmt.Errorf("no RAPL package domain under %s (no powercap driver, or not readable)", filepath.Join(root, "sys/class/powercap"))
	}
	return p, nil
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
	return int(uj/1e6/dt + 0.5), true
}
