package agent

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latticehpc/lattice/agent/supervise"
	"github.com/latticehpc/lattice/model"
)

// Usage is what a run (or a step) used on this agent's node, from its
// cgroup: CPU time, peak memory, and energy.
type Usage struct {
	UserSec   float64 `json:"user_sec,omitempty"`
	SystemSec float64 `json:"system_sec,omitempty"`
	MaxRSS    int64   `json:"max_rss,omitempty"` // bytes
	// MaxRSSSampled: no hierarchy keeps a peak; MaxRSS is the largest of
	// the samples (every rssSampleInterval).
	MaxRSSSampled bool    `json:"max_rss_sampled,omitempty"`
	EnergyJoules  float64 `json:"energy_joules,omitempty"`
	// EnergySource is "rapl" (measured: the node's RAPL counters over the
	// run) or "model" (the node's configured busy draw × elapsed).
	EnergySource string `json:"energy_source,omitempty"`
	// OOMKills counts the processes the kernel killed for the memory limit.
	OOMKills int64 `json:"oom_kills,omitempty"`
}

var errNotRunning = errors.New("the allocation does not run here")

// rssSampleInterval is how often a run's memory is sampled where no
// cgroup keeps its peak.
const rssSampleInterval = time.Second

// runCgroup is the cgroup state of one run.
type runCgroup struct {
	id      string // launch id: job_<id>
	mu      sync.Mutex
	peakRSS int64 // sampled
	stop    chan struct{}
	// energy at the start: RAPL counter sum (µJ), and the start time.
	raplStart uint64
	raplOK    bool
	started   time.Time
}

// cgroupOf makes the cgroup of a launch and says where its entrypoint
// starts; nil without cgroups (virtual runs, none writable).
func (r *Runner) cgroupOf(l *Launch) (*runCgroup, *supervise.Cgroups, error) {
	if r.cg == nil {
		return nil, nil, nil
	}
	id := l.LaunchID
	if id == "" {
		id = launchID(l.AllocID, l.RequeueCount)
	}
	if err := r.cg.create(id, l.MemLimitBytes); err != nil {
		return nil, nil, err
	}
	place, err := r.cg.place(id, batchCgroup)
	if err != nil {
		r.cg.remove(id)
		return nil, nil, err
	}
	return r.watchCgroup(id), place, nil
}

// watchCgroup starts the per-run bookkeeping of cgroup id (sampling,
// energy counters): a new run, or one adopted after a restart.
func (r *Runner) watchCgroup(id string) *runCgroup {
	rc := &runCgroup{id: id, stop: make(chan struct{}), started: time.Now()}
	if r.energy != nil {
		rc.raplStart, rc.raplOK = r.energy()
	}
	if !r.cg.hasMemPeak() {
		go func() {
			t := time.NewTicker(rssSampleInterval)
			defer t.Stop()
			for {
				if rss := rssOf(r.cg.pids(id, "")); rss > 0 {
					rc.mu.Lock()
					rc.peakRSS = max(rc.peakRSS, rss)
					rc.mu.Unlock()
				}
				select {
				case <-rc.stop:
					return
				case <-t.C:
				}
			}
		}()
	}
	return rc
}

// usage reads a run's figures now (while it runs: latticectl stat).
func (r *Runner) usage(rc *runCgroup, sub string, watts int) Usage {
	s := r.cg.stats(rc.id, sub)
	u := Usage{UserSec: s.UserSec, SystemSec: s.SystemSec, MaxRSS: s.MaxRSS, OOMKills: s.OOMKills}
	if sub == "" {
		if !r.cg.hasMemPeak() {
			rc.mu.Lock()
			u.MaxRSS, u.MaxRSSSampled = max(rc.peakRSS, rssOf(r.cg.pids(rc.id, ""))), true
			rc.mu.Unlock()
		}
		if rc.raplOK {
			if now, ok := r.energy(); ok && now >= rc.raplStart {
				u.EnergyJoules, u.EnergySource = float64(now-rc.raplStart)/1e6, "rapl"
			}
		}
		if u.EnergySource == "" && watts > 0 {
			u.EnergyJoules, u.EnergySource = float64(watts)*time.Since(rc.started).Seconds(), "model"
		}
	}
	return u
}

// endCgroup ends whatever of a run is left in its cgroup (setsid
// daemons, nohup), reads its figures and removes the cgroup.
func (r *Runner) endCgroup(p *process) *Usage {
	rc := p.cg
	if rc == nil || r.cg == nil {
		return nil
	}
	if err := r.cg.kill(rc.id); err != nil {
		r.log.Error("cgroup: processes of an ended run are left", "alloc", p.launch.AllocID, "err", err)
	}
	close(rc.stop)
	u := r.usage(rc, "", p.launch.BusyWatts)
	r.cg.remove(rc.id)
	return &u
}

// cgroupEnd sets what the cgroup says about how a run ended: a run that
// the kernel killed processes of for its memory limit, and the agent did
// not stop, ends FAILED OutOfMemory.
func cgroupEnd(ex *Exit, why string, u *Usage) {
	if u == nil {
		return
	}
	ex.Usage = u
	if u.OOMKills > 0 && why == "" && ex.State != model.StateSuspended {
		ex.State, ex.Reason = model.StateFailed, model.ReasonOutOfMemory
		ex.Message = "the job used more memory than its limit (--mem/--mem-per-cpu); the kernel killed it"
	}
}

// startInCgroup starts cmd (its SysProcAttr set) inside place.
func startInCgroup(place *supervise.Cgroups, cmd *exec.Cmd) error {
	return supervise.StartIn(place, cmd.SysProcAttr, cmd.Start)
}

// cgroupEnv is a per-job supervisor's CgroupEnv entry.
func cgroupEnv(place *supervise.Cgroups) []string {
	if place.Empty() {
		return nil
	}
	b, _ := json.Marshal(place)
	return []string{supervise.CgroupEnv + "=" + string(b)}
}

// adoptCgroup re-attaches an adopted run to its cgroup, if it has one.
func (r *Runner) adoptCgroup(p *process) {
	if r.cg == nil {
		return
	}
	id := p.launch.LaunchID
	if id == "" {
		id = launchID(p.launch.AllocID, p.launch.RequeueCount)
	}
	if _, err := os.Stat(r.cg.trackingDir(jobCgroupName(id))); err == nil {
		p.cg = r.watchCgroup(id)
		if !p.launch.Started.IsZero() {
			p.cg.started = p.launch.Started
		}
	}
}

// endStrayCgroups kills and removes the cgroups of runs this agent does
// not run (a restarted agent: runs that ended while it was down, or that
// it must not keep). It waits until their processes are gone.
func (r *Runner) endStrayCgroups() int {
	if r.cg == nil {
		return 0
	}
	keep := map[string]bool{}
	r.mu.Lock()
	for _, p := range r.running {
		if p.cg != nil {
			keep[p.cg.id] = true
		}
	}
	r.mu.Unlock()
	n := 0
	for _, id := range r.cg.runs() {
		if keep[id] {
			continue
		}
		if pids := r.cg.pids(id, ""); len(pids) > 0 {
			n += len(pids)
		}
		if err := r.cg.kill(id); err != nil {
			r.log.Error("cgroup: processes of a run this agent does not keep are left", "cgroup", id, "err", err)
		}
		r.cg.remove(id)
	}
	return n
}

// killCgroupOf ends every process in the cgroup of a running allocation
// (the grace of a stop is over): what left its process group goes too.
func (r *Runner) killCgroupOf(p *process) {
	if r.cg != nil && p.cg != nil {
		_ = r.cg.kill(p.cg.id)
	}
}

// Freeze stops (true) or resumes every process of a running allocation
// through the freezer (latticectl suspend/resume; SIGSTOP/SIGCONT to its
// process group without cgroups). Its walltime does not run while it is
// frozen.
func (r *Runner) Freeze(id uint64, on bool) error {
	r.mu.Lock()
	p := r.running[id]
	if p == nil {
		r.mu.Unlock()
		return errNotRunning
	}
	if on == !p.frozenAt.IsZero() {
		r.mu.Unlock()
		return nil // already so
	}
	r.mu.Unlock()
	var err error
	if r.cg == nil || p.cg == nil {
		err = p.signal(map[bool]syscall.Signal{true: syscall.SIGSTOP, false: syscall.SIGCONT}[on])
	} else {
		err = r.cg.freeze(p.cg.id, on)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if on {
		p.frozenAt = time.Now()
		if p.timer != nil {
			p.timer.Stop()
		}
		return nil
	}
	p.launch.Walltime += time.Since(p.frozenAt)
	p.frozenAt = time.Time{}
	if p.timer != nil && p.launch.Walltime > 0 {
		p.timer.Reset(max(time.Until(p.launch.Started.Add(p.launch.Walltime)), 0))
	}
	return nil
}

// thawToStop resumes a frozen run before it is stopped: a frozen process
// cannot act on its SIGTERM.
func (r *Runner) thawToStop(p *process) {
	r.mu.Lock()
	frozen := !p.frozenAt.IsZero()
	r.mu.Unlock()
	if frozen {
		_ = r.Freeze(p.launch.AllocID, false)
	}
}

// LiveUsage is the usage of a running allocation so far (latticectl stat).
func (r *Runner) LiveUsage(id uint64) (Usage, bool) {
	r.mu.Lock()
	p := r.running[id]
	r.mu.Unlock()
	if p == nil || p.cg == nil || r.cg == nil {
		return Usage{}, false
	}
	return r.usage(p.cg, "", p.launch.BusyWatts), true
}

// CgroupLayout is the cgroup layout jobs run in: v2, v1 or none.
func (r *Runner) CgroupLayout() string {
	if r.cg == nil {
		return CgroupsNone
	}
	return r.cg.layout
}

// stepCgroupOf makes the cgroup of one step of allocation alloc on this
// node: inside the run's cgroup when its entrypoint runs here, else in a
// cgroup of the allocation's steps on this node (job_ALLOC.steps).
// It returns the run's cgroup id ("" without cgroups) and where the
// step's tasks start.
func (r *Runner) stepCgroupOf(alloc uint64, step int32, node string) (string, *supervise.Cgroups, error) {
	if r.cg == nil {
		return "", nil, nil
	}
	r.mu.Lock()
	p := r.running[alloc]
	r.mu.Unlock()
	id := strconv.FormatUint(alloc, 10) + ".steps"
	if p != nil && p.cg != nil {
		id = p.cg.id
	} else if err := r.cg.create(id, 0); err != nil {
		return "", nil, err
	}
	place, err := r.cg.place(id, stepCgroup(step, node))
	if err != nil {
		return "", nil, err
	}
	return id, place, nil
}

// endStepCgroup ends what the tasks of a step left in its cgroup, and
// removes it (and the allocation's cgroup of steps once it is empty).
func (r *Runner) endStepCgroup(id string, step int32, node string) *Usage {
	if r.cg == nil || id == "" {
		return nil
	}
	rel := filepath.Join(jobCgroupName(id), stepCgroup(step, node))
	if err := r.cg.killRel(rel); err != nil {
		r.log.Error("cgroup: processes of an ended step are left", "cgroup", rel, "err", err)
	}
	s := r.cg.stats(id, stepCgroup(step, node))
	for _, d := range r.cg.dirs(rel) {
		removeTree(d)
	}
	if strings.HasSuffix(id, ".steps") {
		for _, d := range r.cg.dirs(jobCgroupName(id)) {
			_ = syscall.Rmdir(d) // only once no other step is in it
		}
	}
	// A step's peak is its cgroup's where a hierarchy keeps one (no
	// sampling per step).
	return &Usage{UserSec: s.UserSec, SystemSec: s.SystemSec, MaxRSS: s.MaxRSS, OOMKills: s.OOMKills}
}

// adoptedCgroups are the cgroup names (job_ID.RUN) of the runs adopted
// after a restart.
func (r *Runner) adoptedCgroups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.running {
		if p.cg != nil {
			out = append(out, "/"+jobCgroupName(p.cg.id)+"/")
		}
	}
	return out
}

// inCgroupOf reports whether process pid is in one of the cgroups named
// (a restarted agent keeps what an adopted run started, even outside its
// process group).
func inCgroupOf(pid int, names []string) bool {
	if len(names) == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	s := string(b)
	for _, n := range names {
		if strings.Contains(s, n) {
			return true
		}
	}
	return false
}

// ensurePlaced moves a job the supervisor daemon started into its cgroups
// when the daemon did not (one of an older version, which ignores
// Msg.Cgroups, still runs after an upgrade): what it forked before the
// move escapes, as without cgroups.
func (r *Runner) ensurePlaced(pid int, place *supervise.Cgroups) {
	if place.Empty() || pid <= 0 {
		return
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return // it ended already
	}
	want := place.V2
	if want == "" && len(place.V1) > 0 {
		want = filepath.Dir(place.V1[0])
	}
	if strings.Contains(string(b), ":"+strings.TrimPrefix(want, r.cgMountOf(want))+"\n") {
		return
	}
	r.log.Warn("the job supervisor daemon (an older version) did not start the job in its cgroup; moving it", "pid", pid)
	if place.V2 != "" {
		_ = os.WriteFile(filepath.Join(place.V2, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	}
	for _, tasks := range place.V1 {
		_ = os.WriteFile(filepath.Join(filepath.Dir(tasks), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	}
}

// cgMountOf is the mount point of the hierarchy holding dir.
func (r *Runner) cgMountOf(dir string) string {
	v2, v1 := cgroupMounts("")
	best := ""
	for _, m := range append([]string{v2}, valuesOf(v1)...) {
		if m != "" && strings.HasPrefix(dir, m+"/") && len(m) > len(best) {
			best = m
		}
	}
	return best
}

func valuesOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
