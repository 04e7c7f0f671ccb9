package agent

// Cgroups: every run of an allocation gets a cgroup on its node, and every
// step a child of it; ending the run ends the whole cgroup, so nothing a
// job starts (setsid, daemons, nohup) outlives it. See docs/operations.md.
//
// Layouts:
//   - v2: a cgroup2 mount. Tracking, cgroup.kill and cgroup.freeze, and
//     cpu.stat (user and system time) need no controller. Memory and pids
//     limits need those controllers enabled in the agent's subtree; when
//     the v2 hierarchy does not have them (a hybrid host, where v1 holds
//     them) they come from the v1 memory and pids hierarchies, if mounted.
//   - v1: named hierarchies, each with its own tree: memory (limit, peak,
//     OOM kills), cpuacct (user and system time), pids (limit) and freezer
//     (freeze; killing = freeze, SIGKILL every task, thaw).
//   - none: nothing writable (latticed dev as a normal user, containers):
//     runs are tracked by process group only.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/latticehpc/lattice/agent/supervise"
)

// Cgroup modes (Config.Cgroups).
const (
	CgroupsAuto = "auto" // v2 when writable, else v1, else none
	CgroupsV2   = "v2"
	CgroupsV1   = "v1"
	CgroupsNone = "none"
)

// ParseCgroupMode checks a --cgroups value ("" = auto).
func ParseCgroupMode(s string) (string, error) {
	switch s {
	case "", CgroupsAuto:
		return CgroupsAuto, nil
	case CgroupsV2, CgroupsV1, CgroupsNone:
		return s, nil
	}
	return "", fmt.Errorf("cgroups %q: want auto, v2, v1 or none", s)
}

// CgroupConfig configures the cgroups of a node's jobs.
type CgroupConfig struct {
	Mode string // CgroupsAuto (""), CgroupsV2, CgroupsV1 or CgroupsNone
	// Root is the cgroup (a path inside each hierarchy, e.g.
	// /system.slice/lattice-agent.service) under which the agent makes its
	// jobs' cgroups; "" = the agent's own cgroup when it starts.
	Root string
	// PidsMax limits the tasks of one job on one node (0 = no limit).
	PidsMax int64
	// ReservedMemMB is kept for the system: all jobs of the agent together
	// may use the node's memory less this much (0 = no such limit).
	ReservedMemMB int64
	// FS is the root of /proc and /sys ("" = /): tests.
	FS string
}

// v1Controllers are the v1 hierarchies the agent uses, in order.
var v1Controllers = []string{"memory", "cpuacct", "pids", "freezer"}

// cgroupManager makes and ends the cgroups of one agent's jobs.
type cgroupManager struct {
	layout string // CgroupsV2 or CgroupsV1
	// v2 is the agent's directory of jobs in the v2 hierarchy ("" in v1).
	v2 string
	// v2ctl: controllers enabled for the jobs in v2.
	v2ctl map[string]bool
	// v1: controller → the agent's directory of jobs in its v1 hierarchy
	// (in v2 layout only those v2 lacks: memory, pids).
	v1      map[string]string
	pidsMax int64
	log     *slog.Logger
}

// jobCgroupName is the cgroup of one run: its launch id.
func jobCgroupName(launchID string) string { return "job_" + launchID }

// batchCgroup holds the entrypoint; stepCgroup(N, NODE) the tasks of step
// N on NODE (an agent may run several nodes: simulated ones).
const batchCgroup = "batch"

func stepCgroup(step int32, node string) string {
	return "step_" + strconv.Itoa(int(step)) + "." + strings.ReplaceAll(node, "/", "_")
}

// newCgroupManager detects the layout and prepares the agent's directory
// of jobs; nil (and the reason, logged once) when no cgroup can be used.
func newCgroupManager(cfg CgroupConfig, dataDir string, log *slog.Logger) *cgroupManager {
	mode, err := ParseCgroupMode(cfg.Mode)
	if err != nil || mode == CgroupsNone {
		log.Info("cgroups: not used (--cgroups none); jobs are tracked by process group")
		return nil
	}
	abs, _ := filepath.Abs(dataDir)
	h := sha256.Sum256([]byte(abs))
	name := "lattice-" + hex.EncodeToString(h[:6])
	v2mount, v1mounts := cgroupMounts(cfg.FS)
	own := ownCgroups(cfg.FS)
	var why []string
	if mode == CgroupsAuto || mode == CgroupsV2 {
		m, err := setupV2(cfg, v2mount, v1mounts, own, name, log)
		if err == nil {
			return m
		}
		why = append(why, "v2: "+err.Error())
	}
	if mode == CgroupsAuto || mode == CgroupsV1 {
		m, err := setupV1(cfg, v1mounts, own, name, log)
		if err == nil {
			return m
		}
		why = append(why, "v1: "+err.Error())
	}
	log.Warn("cgroups: none writable; jobs are tracked by process group only (a process that calls setsid escapes, no memory limit, no usage figures from cgroups)",
		"why", strings.Join(why, "; "))
	return nil
}

// cgroupMounts finds the v2 mount and the v1 mounts by controller.
func cgroupMounts(fs string) (v2 string, v1 map[string]string) {
	v1 = map[string]string{}
	b, err := os.ReadFile(filepath.Join(fs, "/proc/self/mountinfo"))
	if err != nil {
		return "", v1
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent maj:min root mountpoint opts... - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		mnt := f[4]
		if fs != "" && fs != "/" {
			mnt = filepath.Join(fs, mnt)
		}
		switch g[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = mnt
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if slices.Contains(v1Controllers, o) {
					if _, dup := v1[o]; !dup {
						v1[o] = mnt
					}
				}
			}
		}
	}
	return v2, v1
}

// ownCgroups is this process's cgroup path by controller ("" = v2).
func ownCgroups(fs string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(fs, "/proc/self/cgroup"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// agentLeaf is the leaf a v2 agent runs in when its service's cgroup hands
// controllers down to the jobs (no process may stay in a cgroup that does):
// systemd's DelegateSubgroup=lattice-agent. Its jobs' cgroups go beside it.
const agentLeaf = "lattice-agent"

func cgroupParent(cfg CgroupConfig, own string) string {
	if cfg.Root != "" {
		return cfg.Root
	}
	// A restarted agent may find itself in the leaf it moved into.
	if filepath.Base(own) == agentLeaf {
		return filepath.Dir(own)
	}
	return own
}

func setupV2(cfg CgroupConfig, mount string, v1mounts, own map[string]string, name string, log *slog.Logger) (*cgroupManager, error) {
	if mount == "" {
		return nil, errors.New("no cgroup2 mount")
	}
	ownPath, ok := own[""]
	if !ok {
		return nil, errors.New("this process is in no v2 cgroup")
	}
	parent := filepath.Join(mount, cgroupParent(cfg, ownPath))
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err != nil {
			return nil, fmt.Errorf("%s has neither cgroup.kill nor cgroup.freeze (kernel before 5.2)", dir)
		}
	}
	m := &cgroupManager{layout: CgroupsV2, v2: dir, v2ctl: map[string]bool{}, v1: map[string]string{}, pidsMax: cfg.PidsMax, log: log}
	avail := strings.Fields(readTrim("", filepath.Join(parent, "cgroup.controllers")))
	var busy []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(avail, c) {
			continue
		}
		err := enableController(parent, c)
		if errors.Is(err, syscall.EBUSY) {
			// Processes in the parent (the agent itself, in its own
			// cgroup): a cgroup that hands controllers down holds none.
			// systemd's DelegateSubgroup=lattice-agent starts the agent in
			// a leaf; the agent does not move itself (systemd would start
			// its successor in the parent, and fail).
			busy = append(busy, c)
			continue
		}
		if err == nil {
			err = enableController(dir, c)
		}
		if err == nil {
			m.v2ctl[c] = true
		}
	}
	// What v2 cannot limit here, v1 may (a hybrid host).
	for _, c := range []string{"memory", "pids"} {
		if m.v2ctl[c] || v1mounts[c] == "" {
			continue
		}
		d := filepath.Join(v1mounts[c], cgroupParent(cfg, own[c]), name)
		if err := os.MkdirAll(d, 0o755); err == nil {
			m.v1[c] = d
		}
	}
	if len(busy) > 0 {
		log.Warn("cgroups: v2 controllers cannot be handed to the jobs while the agent's own cgroup holds processes; start the agent in a leaf (systemd: DelegateSubgroup="+agentLeaf+", or --cgroup-root)",
			"controllers", busy, "cgroup", parent)
	}
	m.reserve(cfg.ReservedMemMB)
	log.Info("cgroups: v2", "dir", dir, "v2_controllers", keys(m.v2ctl), "v1_controllers", keys(m.v1),
		"memory_limit", m.v2ctl["memory"] || m.v1["memory"] != "", "kill", m.killFile())
	return m, nil
}

func setupV1(cfg CgroupConfig, mounts, own map[string]string, name string, log *slog.Logger) (*cgroupManager, error) {
	m := &cgroupManager{layout: CgroupsV1, v1: map[string]string{}, pidsMax: cfg.PidsMax, log: log}
	var errs []string
	for _, c := range v1Controllers {
		if mounts[c] == "" {
			continue
		}
		d := filepath.Join(mounts[c], cgroupParent(cfg, own[c]), name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		m.v1[c] = d
	}
	if len(m.v1) == 0 {
		if len(errs) == 0 {
			return nil, errors.New("no v1 hierarchy of memory, cpuacct, pids or freezer is mounted")
		}
		return nil, errors.New(strings.Join(errs, "; "))
	}
	if m.v1["freezer"] == "" && m.v1["memory"] == "" && m.v1["pids"] == "" && m.v1["cpuacct"] == "" {
		return nil, errors.New("no usable v1 hierarchy")
	}
	if d := m.v1["memory"]; d != "" {
		_ = os.WriteFile(filepath.Join(d, "memory.use_hierarchy"), []byte("1"), 0)
	}
	m.reserve(cfg.ReservedMemMB)
	log.Info("cgroups: v1", "controllers", keys(m.v1), "dirs", m.v1, "freezer", m.v1["freezer"] != "")
	return m, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func enableController(dir, c string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0)
}

// reserve limits all jobs together to the node's memory less mb.
func (m *cgroupManager) reserve(mb int64) {
	if mb <= 0 {
		return
	}
	total := memTotalBytes()
	if total <= 0 {
		return
	}
	limit := total - mb<<20
	if limit <= 0 {
		m.log.Warn("cgroups: the memory reserved for the system is more than the node has; no limit set", "reserved_mb", mb)
		return
	}
	if err := m.setMemory("", limit); err != nil {
		m.log.Warn("cgroups: cannot limit the jobs' memory", "err", err)
	}
}

func memTotalBytes() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (m *cgroupManager) killFile() bool {
	if m.v2 == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(m.v2, "cgroup.kill"))
	return err == nil
}

// dirs are rel's directories in every hierarchy the agent uses.
func (m *cgroupManager) dirs(rel string) []string {
	var out []string
	if m.v2 != "" {
		out = append(out, filepath.Join(m.v2, rel))
	}
	for _, c := range v1Controllers {
		if d := m.v1[c]; d != "" {
			out = append(out, filepath.Join(d, rel))
		}
	}
	return out
}

// create makes the cgroup of a run, limited to memBytes (0 = no limit).
func (m *cgroupManager) create(launchID string, memBytes int64) error {
	rel := jobCgroupName(launchID)
	for _, d := range m.dirs(rel) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	if m.v2 != "" {
		// The steps' own figures (memory.peak, pids) need the controllers below too.
		for c := range m.v2ctl {
			_ = enableController(filepath.Join(m.v2, rel), c)
		}
	}
	if memBytes > 0 {
		if err := m.setMemory(rel, memBytes); err != nil {
			return err
		}
	}
	if m.pidsMax > 0 {
		if m.v2ctl["pids"] {
			_ = os.WriteFile(filepath.Join(m.v2, rel, "pids.max"), []byte(strconv.FormatInt(m.pidsMax, 10)), 0)
		} else if d := m.v1["pids"]; d != "" {
			_ = os.WriteFile(filepath.Join(d, rel, "pids.max"), []byte(strconv.FormatInt(m.pidsMax, 10)), 0)
		}
	}
	return nil
}

// canLimitMemory reports whether a memory limit can be set.
func (m *cgroupManager) canLimitMemory() bool { return m.v2ctl["memory"] || m.v1["memory"] != "" }

func (m *cgroupManager) setMemory(rel string, bytes int64) error {
	v := []byte(strconv.FormatInt(bytes, 10))
	switch {
	case m.v2ctl["memory"]:
		d := filepath.Join(m.v2, rel)
		if err := os.WriteFile(filepath.Join(d, "memory.max"), v, 0); err != nil {
			return fmt.Errorf("cgroup memory.max: %w", err)
		}
		_ = os.WriteFile(filepath.Join(d, "memory.swap.max"), []byte("0"), 0)
	case m.v1["memory"] != "":
		d := filepath.Join(m.v1["memory"], rel)
		if err := os.WriteFile(filepath.Join(d, "memory.limit_in_bytes"), v, 0); err != nil {
			return fmt.Errorf("cgroup memory.limit_in_bytes: %w", err)
		}
		// No swapping past the limit either, where swap is accounted.
		_ = os.WriteFile(filepath.Join(d, "memory.memsw.limit_in_bytes"), v, 0)
	default:
		return errors.New("cgroup: no memory controller (neither v2 nor v1)")
	}
	return nil
}

// place is where a process of sub (batchCgroup, stepCgroup) of a run
// starts; the sub cgroup is made when missing.
func (m *cgroupManager) place(launchID, sub string) (*supervise.Cgroups, error) {
	rel := filepath.Join(jobCgroupName(launchID), sub)
	c := &supervise.Cgroups{}
	if m.v2 != "" {
		d := filepath.Join(m.v2, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		c.V2 = d
	}
	for _, ctl := range v1Controllers {
		if d := m.v1[ctl]; d != "" {
			d = filepath.Join(d, rel)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("cgroup: %w", err)
			}
			c.V1 = append(c.V1, filepath.Join(d, "tasks"))
		}
	}
	return c, nil
}

// readPids reads a cgroup.procs (or tasks) file.
func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// treePids lists the processes in dir and every cgroup below it.
func treePids(dir string) []int {
	var out []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			out = append(out, readPids(filepath.Join(p, "cgroup.procs"))...)
		}
		return nil
	})
	return out
}

// trackingDir is the directory whose tree holds every process of a run.
func (m *cgroupManager) trackingDir(rel string) string {
	if m.v2 != "" {
		return filepath.Join(m.v2, rel)
	}
	for _, c := range []string{"freezer", "pids", "memory", "cpuacct"} {
		if d := m.v1[c]; d != "" {
			return filepath.Join(d, rel)
		}
	}
	return ""
}

// pids lists every process of a run (or of one of its subs).
func (m *cgroupManager) pids(launchID, sub string) []int {
	return treePids(m.trackingDir(filepath.Join(jobCgroupName(launchID), sub)))
}

// kill ends every process of a run and waits (up to 10 s) until none is
// left: cgroup.kill on v2; else frozen, SIGKILLed, thawed, until empty.
func (m *cgroupManager) kill(launchID string) error {
	return m.killRel(jobCgroupName(launchID))
}

func (m *cgroupManager) killRel(rel string) error {
	dir := m.trackingDir(rel)
	if _, err := os.Stat(dir); err != nil {
		return nil // never made, or removed already
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := treePids(dir)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d processes still there after SIGKILL", dir, len(pids))
		}
		if m.v2 != "" && writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
			// The kernel kills them all, forks in flight included.
		} else {
			frozen := m.freezeRel(rel, true) == nil
			for _, pid := range treePids(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if frozen {
				_ = m.freezeRel(rel, false)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeFile(path, v string) error { return os.WriteFile(path, []byte(v), 0) }

// freeze stops (true) or resumes every process of a run.
func (m *cgroupManager) freeze(launchID string, on bool) error {
	return m.freezeRel(jobCgroupName(launchID), on)
}

func (m *cgroupManager) freezeRel(rel string, on bool) error {
	deadline := time.Now().Add(5 * time.Second)
	if m.v2 != "" {
		d := filepath.Join(m.v2, rel)
		v := map[bool]string{true: "1", false: "0"}[on]
		if err := writeFile(filepath.Join(d, "cgroup.freeze"), v); err != nil {
			return err
		}
		for on && !strings.Contains(readTrim("", filepath.Join(d, "cgroup.events")), "frozen 1") {
			if time.Now().After(deadline) {
				return fmt.Errorf("cgroup %s: not frozen after 5 s", d)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	fz := m.v1["freezer"]
	if fz == "" {
		return errors.New("cgroup: no freezer hierarchy")
	}
	d := filepath.Join(fz, rel)
	want := map[bool]string{true: "FROZEN", false: "THAWED"}[on]
	if err := writeFile(filepath.Join(d, "freezer.state"), want); err != nil {
		return err
	}
	for readTrim("", filepath.Join(d, "freezer.state")) != want {
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: not %s after 5 s", d, want)
		}
		_ = writeFile(filepath.Join(d, "freezer.state"), want)
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// remove deletes a run's cgroups (after kill), deepest first.
func (m *cgroupManager) remove(launchID string) {
	for _, d := range m.dirs(jobCgroupName(launchID)) {
		removeTree(d)
	}
}

func removeTree(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50; try++ {
			err := syscall.Rmdir(dirs[i])
			if err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(10 * time.Millisecond) // the last exits are being reaped
		}
	}
}

// runs lists the launch ids whose cgroups exist (a restarted agent ends
// those it does not adopt).
func (m *cgroupManager) runs() []string {
	dir := m.trackingDir("")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), "job_"); ok && e.IsDir() {
			out = append(out, id)
		}
	}
	return out
}

// cgroupStats are a cgroup's figures.
type cgroupStats struct {
	UserSec, SystemSec float64
	// MaxRSS is the peak memory (bytes), 0 when no hierarchy keeps one
	// (then the runner samples it); MemNow the current use.
	MaxRSS, MemNow int64
	OOMKills       int64
}

// stats reads the figures of a run (sub "") or of one of its subs.
func (m *cgroupManager) stats(launchID, sub string) cgroupStats {
	rel := filepath.Join(jobCgroupName(launchID), sub)
	var s cgroupStats
	if m.v2 != "" {
		kv := readKV(filepath.Join(m.v2, rel, "cpu.stat"))
		s.UserSec, s.SystemSec = float64(kv["user_usec"])/1e6, float64(kv["system_usec"])/1e6
		if m.v2ctl["memory"] {
			s.MaxRSS, _ = strconv.ParseInt(readTrim("", filepath.Join(m.v2, rel, "memory.peak")), 10, 64)
			s.MemNow, _ = strconv.ParseInt(readTrim("", filepath.Join(m.v2, rel, "memory.current")), 10, 64)
			s.OOMKills = readKV(filepath.Join(m.v2, rel, "memory.events"))["oom_kill"]
		}
	} else if d := m.v1["cpuacct"]; d != "" {
		d = filepath.Join(d, rel)
		u, uerr := strconv.ParseInt(readTrim("", filepath.Join(d, "cpuacct.usage_user")), 10, 64)
		y, yerr := strconv.ParseInt(readTrim("", filepath.Join(d, "cpuacct.usage_sys")), 10, 64)
		if uerr == nil && yerr == nil {
			s.UserSec, s.SystemSec = float64(u)/1e9, float64(y)/1e9
		} else {
			kv := readKV(filepath.Join(d, "cpuacct.stat")) // USER_HZ ticks
			s.UserSec, s.SystemSec = float64(kv["user"])/100, float64(kv["system"])/100
		}
		// cpuacct.usage is the precise total (the scheduler's runtime);
		// usage_user/usage_sys and cpuacct.stat split it by sampling ticks,
		// whose sum strays by a few percent either way (measured on this
		// gVisor host: 1.96–2.06 s for a 2.03 s workload, against 2.029–2.038
		// s for cpuacct.usage). The total is cpuacct.usage, split as they say.
		if t, err := strconv.ParseInt(readTrim("", filepath.Join(d, "cpuacct.usage")), 10, 64); err == nil && t > 0 {
			if sum := s.UserSec + s.SystemSec; sum > 0 {
				k := float64(t) / 1e9 / sum
				s.UserSec, s.SystemSec = s.UserSec*k, s.SystemSec*k
			} else {
				s.UserSec = float64(t) / 1e9
			}
		}
	}
	if d := m.v1["memory"]; d != "" && !m.v2ctl["memory"] {
		d = filepath.Join(d, rel)
		s.MaxRSS, _ = strconv.ParseInt(readTrim("", filepath.Join(d, "memory.max_usage_in_bytes")), 10, 64)
		s.MemNow, _ = strconv.ParseInt(readTrim("", filepath.Join(d, "memory.usage_in_bytes")), 10, 64)
		// v1 counts an OOM kill in the victim's own cgroup: sum the tree.
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				s.OOMKills += readKV(filepath.Join(p, "memory.oom_control"))["oom_kill"]
			}
			return nil
		})
	}
	return s
}

// hasMemPeak reports whether the kernel keeps the peak memory (else the
// runner samples the processes' RSS).
func (m *cgroupManager) hasMemPeak() bool {
	if m.v2ctl["memory"] {
		_, err := os.Stat(filepath.Join(m.v2, "memory.peak"))
		return err == nil
	}
	return m.v1["memory"] != ""
}

// readKV reads "key value" lines.
func readKV(path string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
			out[string(k)] = n
		}
	}
	return out
}

// rssOf sums the resident memory of pids (sampling, where no cgroup
// keeps a peak).
func rssOf(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			total += pages * int64(os.Getpagesize())
		}
	}
	return total
}

// close removes the agent's directories of jobs when no job is left in
// them (an agent that stops its jobs; one that leaves them keeps them).
func (m *cgroupManager) close() {
	for _, d := range m.dirs("") {
		_ = syscall.Rmdir(d)
	}
}
