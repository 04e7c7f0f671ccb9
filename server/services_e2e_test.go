package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// svcShow is the part of `service show -o json` the tests read.
type svcShow struct {
	Replicas      int      `json:"replicas"`
	Desired       int      `json:"desired"`
	Min           int      `json:"min"`
	Max           int      `json:"max"`
	MetricAverage *float64 `json:"metric_average"`
	Restarts      int      `json:"restarts"`
	Reason        string   `json:"reason"`
	Waiting       string   `json:"waiting"`
	LastDecision  *struct {
		Time      string `json:"time"`
		From      int    `json:"from"`
		To        int    `json:"to"`
		Direction string `json:"direction"`
		Reason    string `json:"reason"`
	} `json:"last_decision"`
	Instances []struct {
		ID       uint64 `json:"id"`
		State    string `json:"state"`
		Node     string `json:"node"`
		Endpoint string `json:"endpoint"`
		Stopping bool   `json:"stopping"`
	} `json:"instances"`
}

// buildInferenceServer builds examples/inference-server into dir.
func buildInferenceServer(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "inference-server")
	cmd := exec.Command("go", "build", "-o", bin, "../examples/inference-server")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the inference server: %v\n%s", err, out)
	}
	return bin
}

// svcWatch polls a service (and the whole state) in the background: every
// scaling decision it sees, and whether a node running an instance was
// ever also given to other work, or the quorum's invariants ever failed.
type svcWatch struct {
	mu        sync.Mutex
	decisions []time.Time // distinct decision times, in order
	last      svcShow
	problems  []string
	stop      chan struct{}
	done      chan struct{}
}

func (d *devStack) watchService(t *testing.T, dir, name string) *svcWatch {
	w := &svcWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			out, _, code := d.ctl(t, dir, "service", "show", name, "-o", "json")
			var s svcShow
			if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
				continue
			}
			var probs []string
			d.srv.view(func(st *quorum.State) {
				probs = quorum.CheckInvariants(st)
				owner := map[string]*model.Allocation{}
				for _, a := range st.Allocations() {
					if !a.State.Active() {
						continue
					}
					for _, n := range a.Nodes {
						if o := owner[n]; o != nil && (o.Service != "" || a.Service != "") {
							probs = append(probs, fmt.Sprintf("node %s runs %d (service %q) and %d (service %q)", n, o.ID, o.Service, a.ID, a.Service))
						}
						owner[n] = a
					}
				}
			})
			w.mu.Lock()
			w.last = s
			if s.LastDecision != nil {
				at, err := time.Parse(time.RFC3339Nano, s.LastDecision.Time)
				if err == nil && (len(w.decisions) == 0 || !w.decisions[len(w.decisions)-1].Equal(at)) {
					w.decisions = append(w.decisions, at)
				}
			}
			w.problems = append(w.problems, probs...)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.end)
	return w
}

func (w *svcWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *svcWatch) now() svcShow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

func (w *svcWatch) running() []string {
	var eps []string
	for _, in := range w.now().Instances {
		if in.State == string(model.StateRunning) && !in.Stopping && in.Endpoint != "" {
			eps = append(eps, in.Endpoint)
		}
	}
	return eps
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestServiceEndToEnd runs a real HTTP service (examples/inference-server)
// on a dev stack: it starts at its minimum and is reachable at its
// endpoints; under load it scales up to its maximum and back down to its
// minimum after the load stops, at most one change per cooldown; killing an
// instance's process restarts it; draining its node moves it; throughout,
// no node of an instance is given to other work and the quorum's
// invariants hold.
func TestServiceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a service (-short)")
	}
	dir := t.TempDir()
	bin := buildInferenceServer(t, dir)
	loadFile := filepath.Join(dir, "load")
	if err := os.WriteFile(loadFile, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDevWith(t, dir, 8, []string{"service", "hpc-batch"}, func(c *Config) {
		c.ServiceInterval = 200 * time.Millisecond
		c.ServiceBackoffReset = 2 * time.Second
	})
	const cooldown = 3 * time.Second
	out, errOut, code := d.ctl(t, dir, "service", "create", "web", "--min-nodes", "1", "--max-nodes", "3",
		"--scale-metric", "inference_load", "--scale-target", "10", "--scale-cooldown", cooldown.String(),
		"--scale-stabilization", "2s", "--drain-time", "2s", "--env", "LOAD_FILE="+loadFile, "--", bin)
	if code != 0 {
		t.Fatalf("service create: %d %s %s", code, out, errOut)
	}
	w := d.watchService(t, dir, "web")
	// Batch work beside it, on the other vCluster.
	for range 3 {
		d.submit(t, &latticev1.AllocationRequest{Vcluster: "hpc-batch", NodesMin: 1, Command: []string{"sleep", "30"}})
	}

	// It starts at its minimum, reachable at its endpoint.
	waitFor(t, 60*time.Second, "one running instance with an endpoint", func() bool { return len(w.running()) == 1 })
	if s := w.now(); s.Desired != 1 || s.Min != 1 || s.Max != 3 {
		t.Fatalf("at start: %+v", s)
	}
	ep := w.running()[0]
	// RUNNING means started: the server answers once it listens.
	waitFor(t, 30*time.Second, "an answer from "+ep, func() bool {
		body, err := httpGet("http://" + ep + "/infer?ms=1")
		return err == nil && strings.HasPrefix(body, "answer from")
	})
	eps, _, _ := d.ctl(t, dir, "service", "endpoints", "web")
	if strings.TrimSpace(eps) != ep {
		t.Fatalf("service endpoints = %q, want %q", eps, ep)
	}

	// Load: 15 per instance for a target of 10 asks for 2, then 3.
	if err := os.WriteFile(loadFile, []byte("15"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "three running instances", func() bool { return len(w.running()) == 3 })
	if s := w.now(); s.Desired != 3 || s.LastDecision == nil || s.LastDecision.Direction != model.ScaleUp {
		t.Fatalf("after the load: %+v", s)
	}
	if s := w.now(); s.MetricAverage == nil {
		t.Fatalf("no metric average while loaded: %+v", s)
	}

	// Killing an instance's process restarts it.
	victim := w.running()[0]
	var body string
	waitFor(t, 30*time.Second, "an answer from "+victim, func() bool {
		var err error
		body, err = httpGet("http://" + victim + "/healthz")
		return err == nil
	})
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(body), "ok pid")))
	if err != nil {
		t.Fatalf("healthz %q: %v", body, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the killed instance restarted", func() bool {
		s := w.now()
		return s.Restarts >= 1 && len(w.running()) == 3
	})

	// Draining an instance's node moves the instance to another node.
	s := w.now()
	var drained string
	var movedID uint64
	for _, in := range s.Instances {
		if in.State == string(model.StateRunning) && !in.Stopping {
			drained, movedID = in.Node, in.ID
			break
		}
	}
	if _, err := d.nodes.Drain(context.Background(), &latticev1.DrainRequest{Name: drained, Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the instance moved off the drained node", func() bool {
		s := w.now()
		if len(w.running()) != 3 {
			return false
		}
		for _, in := range s.Instances {
			if in.ID == movedID || (in.Node == drained && in.State == string(model.StateRunning)) {
				return false
			}
		}
		return true
	})

	// The load stops: back to the minimum.
	if err := os.WriteFile(loadFile, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "back to one instance", func() bool {
		s := w.now()
		return s.Desired == 1 && len(s.Instances) == 1 && len(w.running()) == 1
	})
	w.end()

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) > 0 {
		t.Errorf("invariants or exclusivity broken:\n%s", strings.Join(w.problems, "\n"))
	}
	if len(w.decisions) < 2 {
		t.Errorf("saw %d scaling decisions, want at least one up and one down", len(w.decisions))
	}
	for i := 1; i < len(w.decisions); i++ {
		if gap := w.decisions[i].Sub(w.decisions[i-1]); gap < cooldown {
			t.Errorf("decisions %d and %d are %s apart, less than the cooldown %s", i-1, i, gap, cooldown)
		}
	}
	mets := d.metricsText(t)
	for _, m := range []string{`lattice_service_scaling_events_total{direction="up"}`, `lattice_service_scaling_events_total{direction="down"}`,
		`lattice_service_replicas{service="web"}`, `lattice_service_desired_replicas{service="web"} 1`} {
		if !strings.Contains(mets, m) {
			t.Errorf("/metrics has no %s", m)
		}
	}
}

func (d *devStack) metricsText(t *testing.T) string {
	t.Helper()
	body, err := httpGet("http://" + d.srv.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestServiceGrowsOnFullMachine: a service whose own vCluster is full
// grows as its class allows: it borrows the idle nodes another vCluster
// lends (its vCluster lets work that cannot checkpoint borrow) and, once
// the machine is full, preempts lower-class work (its vCluster's preempt
// mode requeues work that cannot checkpoint); `explain` on the service
// says so. An instance's node never runs the batch work too.
func TestServiceGrowsOnFullMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a service (-short)")
	}
	dir := t.TempDir()
	bin := buildInferenceServer(t, dir)
	loadFile := filepath.Join(dir, "load")
	if err := os.WriteFile(loadFile, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDevWith(t, dir, 4, []string{"service", "hpc-batch"}, func(c *Config) {
		c.ServiceInterval = 200 * time.Millisecond
		c.VClusters[0].CheckpointableOnlyOnBorrowed = false // instances may borrow
		c.VClusters[0].PreemptMode = model.PreemptRequeue   // and preempt work that cannot checkpoint
		for i := range c.VClusters {
			c.VClusters[i].CycleInterval = time.Second
		}
	})
	// Low-class work on one of the service vCluster's two nodes.
	low := d.submit(t, &latticev1.AllocationRequest{Vcluster: "service", NodesMin: 1, PriorityClass: 1, WalltimeSeconds: 3600, Command: []string{"sleep", "600"}})
	d.waitState(t, low, model.StateRunning)
	out, errOut, code := d.ctl(t, dir, "service", "create", "big", "--min-nodes", "1", "--max-nodes", "4", "--priority-class", "6",
		"--scale-metric", "inference_load", "--scale-target", "10", "--scale-cooldown", "1s", "--drain-time", "1s",
		"--env", "LOAD_FILE="+loadFile, "--", bin)
	if code != 0 {
		t.Fatalf("service create: %d %s %s", code, out, errOut)
	}
	w := d.watchService(t, dir, "big")
	waitFor(t, 60*time.Second, "one running instance", func() bool { return len(w.running()) == 1 })
	if err := os.WriteFile(loadFile, []byte("100"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, "four running instances", func() bool { return len(w.running()) == 4 })
	a := d.waitState(t, low, model.StatePending) // preempted (requeued) for an instance
	if a.GetReason() == "" {
		t.Logf("preempted allocation: %+v", a)
	}
	expl, errOut, code := d.ctl(t, dir, "explain", "big")
	if code != 0 {
		t.Fatalf("explain big: %d %s", code, errOut)
	}
	t.Logf("explain big:\n%s", expl)
	for _, want := range []string{"borrowed from hpc-batch", "took the nodes of allocation " + low, "at its maximum (4)"} {
		if !strings.Contains(expl, want) {
			t.Errorf("explain lacks %q:\n%s", want, expl)
		}
	}
	w.end()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) > 0 {
		t.Errorf("invariants or exclusivity broken:\n%s", strings.Join(w.problems, "\n"))
	}
}

// TestServiceInWorkflowFile: a workflow file's services are created before
// its stages (latticectl dag submit) and run like any service.
func TestServiceInWorkflowFile(t *testing.T) {
	dir := t.TempDir()
	d := startDevWith(t, dir, 2, []string{"service", "hpc-batch"}, func(c *Config) { c.ServiceInterval = 200 * time.Millisecond })
	file := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(file, []byte(`dag_id: with-hub
services:
  - name: hub
    min_nodes: 1
    drain_time: 1s
    entrypoint: [sleep, "300"]
allocations:
  - name: client
    vcluster: hpc-batch
    entrypoint: "true"
    nodes: 1
    walltime: "5:00"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := d.ctl(t, dir, "dag", "submit", "--dry-run", file); code != 0 || !strings.Contains(errOut, "service hub: 1-1 nodes") {
		t.Fatalf("dry run: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := d.ctl(t, dir, "dag", "submit", file); code != 0 || !strings.Contains(errOut, "service hub created") {
		t.Fatalf("dag submit: %d %s %s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "the workflow's service running", func() bool {
		out, _, code := d.ctl(t, dir, "service", "show", "hub", "-o", "json")
		var s svcShow
		return code == 0 && json.Unmarshal([]byte(out), &s) == nil && s.Replicas == 1
	})
}
