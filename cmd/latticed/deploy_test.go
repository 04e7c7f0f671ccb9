package main

// Tests of the files in deploy/ against the real tools: systemd-analyze,
// promtool, a Compose file parser (Debian's docker-compose) and a real
// Prometheus scraping a dev stack that runs work. Missing tools are
// installed by scripts/install-test-tools.sh when it can (root, apt-get);
// otherwise the test skips and says why.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v3"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

const repoRoot = "../.."

func deployPath(parts ...string) string {
	return filepath.Join(append([]string{repoRoot, "deploy"}, parts...)...)
}

// ensureTools installs the Debian packages through the repository's script
// when their commands are missing, or skips the test saying why.
func ensureTools(t *testing.T, pkgs ...string) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(repoRoot, "scripts", "install-test-tools.sh"))
	cmd.Args = append(cmd.Args, pkgs...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("needs %s, which scripts/install-test-tools.sh could not install here: %v\n%s", strings.Join(pkgs, ", "), err, out)
	}
}

func run(t *testing.T, name string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestDeploySystemdUnits: systemd-analyze verify passes on both units, with
// no warning (unknown keys and bad values are only warnings to it). The
// binary path is pointed at the test's build, the one thing verify checks
// on the file system.
func TestDeploySystemdUnits(t *testing.T) {
	ensureTools(t, "systemd")
	dir := t.TempDir()
	var units []string
	for _, name := range []string{"latticed-server.service", "latticed-agent.service"} {
		b, err := os.ReadFile(deployPath("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "/usr/local/bin/latticed", latticedBin)
		if name == "latticed-server.service" && !strings.Contains(text, "\nType=notify\n") {
			t.Errorf("%s: the member notifies systemd (sd_notify), so its unit must say Type=notify", name)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, p)
	}
	out, errOut, err := run(t, "systemd-analyze", append([]string{"verify"}, units...)...)
	if err != nil || strings.TrimSpace(errOut) != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s%s", err, out, errOut)
	}
}

// TestDeploySdNotify: `latticed server` under Type=notify tells systemd
// READY=1 once it serves, and STOPPING=1 on SIGTERM, then exits 0.
func TestDeploySdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := freeAddr(t)
	cmd := exec.Command(latticedBin, "server", "--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--bootstrap",
		"--raft-addr", freeAddr(t), "--api-addr", api, "--metrics-addr", "")
	cmd.Env = append(childEnv(), "NOTIFY_SOCKET="+sock)
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	read := func(want string) {
		t.Helper()
		buf := make([]byte, 512)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, _, err := conn.ReadFromUnix(buf)
		if err != nil || !strings.Contains(string(buf[:n]), want) {
			t.Fatalf("waiting for %s from sd_notify: got %q, %v\n%s", want, buf[:n], err, logs.String())
		}
	}
	read("READY=1")
	// Ready means serving: the API answers now.
	c, err := grpc.NewClient(api, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := latticev1.NewAdminServiceClient(c).QuorumStatus(ctx, &latticev1.QuorumStatusRequest{}); err != nil {
		t.Fatalf("API after READY=1: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	read("STOPPING=1")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit 15 s after SIGTERM")
	}
}

// flagNames lists the long flag names of a latticed subcommand.
func flagNames(t *testing.T, sub string) map[string]bool {
	t.Helper()
	for _, c := range app().Commands {
		if c.Name == sub {
			out := map[string]bool{}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					out[n] = true
				}
			}
			return out
		}
	}
	t.Fatalf("no latticed command %q", sub)
	return nil
}

// TestDeployCompose checks compose.yaml: every service's command uses only
// flags its latticed command has, every LATTICE_ variable is a flag's twin,
// the Dockerfile has the targets it builds; and a Compose parser (Debian's
// docker-compose, `config`) accepts the file.
func TestDeployCompose(t *testing.T) {
	b, err := os.ReadFile(deployPath("compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Build       map[string]any    `yaml:"build"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	docker, err := os.ReadFile(deployPath("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"s1", "s2", "s3", "agent"} {
		if _, ok := f.Services[want]; !ok {
			t.Errorf("compose.yaml has no service %s", want)
		}
	}
	for name, svc := range f.Services {
		if len(svc.Command) == 0 {
			t.Errorf("%s: no command", name)
			continue
		}
		flags := flagNames(t, svc.Command[0])
		for _, a := range svc.Command[1:] {
			if strings.HasPrefix(a, "--") && !flags[strings.TrimPrefix(a, "--")] {
				t.Errorf("%s: latticed %s has no flag %s", name, svc.Command[0], a)
			}
		}
		for k := range svc.Environment {
			flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "LATTICE_"), "_", "-"))
			if !flags[flag] && flag != "log-format" && flag != "log-level" {
				t.Errorf("%s: %s is no flag's twin (latticed %s --%s)", name, k, svc.Command[0], flag)
			}
		}
		if target, _ := svc.Build["target"].(string); !strings.Contains(string(docker), " AS "+target+"\n") {
			t.Errorf("%s: the Dockerfile has no target %q", name, target)
		}
	}
	t.Run("docker-compose config", func(t *testing.T) {
		ensureTools(t, "docker-compose")
		out, errOut, err := run(t, "docker-compose", "-f", deployPath("compose.yaml"), "config", "-q")
		if err != nil {
			t.Fatalf("docker-compose config: %v\n%s%s", err, out, errOut)
		}
	})
}

// TestDeployAlertRules: promtool checks the rules and the scrape config and
// runs the rules' unit tests.
func TestDeployAlertRules(t *testing.T) {
	ensureTools(t, "prometheus")
	for _, args := range [][]string{
		{"check", "rules", deployPath("prometheus", "alerts.yml")},
		{"test", "rules", deployPath("prometheus", "alerts_test.yml")},
		{"check", "config", deployPath("prometheus", "prometheus.yml")},
	} {
		out, errOut, err := run(t, "promtool", args...)
		if err != nil {
			t.Errorf("promtool %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	}
}

// --- a real Prometheus over a dev stack ----------------------------------------------------

type promClient struct{ base string }

func (p promClient) get(path string, q url.Values, v any) error {
	resp, err := http.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, b)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s", path, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// query evaluates expr now and returns how many samples it gave.
func (p promClient) query(expr string) (int, error) {
	var d struct {
		Result []json.RawMessage `json:"result"`
	}
	err := p.get("/api/v1/query", url.Values{"query": {expr}}, &d)
	return len(d.Result), err
}

// dashboardExprs lists every PromQL expression of the Grafana dashboard,
// with its variables replaced as Grafana would (all vClusters, a 1m rate
// interval).
func dashboardExprs(t *testing.T) map[string]string {
	b, err := os.ReadFile(deployPath("grafana", "lattice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	out := map[string]string{}
	r := strings.NewReplacer("$__rate_interval", "1m", "$vcluster", ".*", "${vcluster}", ".*")
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("%s #%d", p.Title, i+1)] = r.Replace(tg.Expr)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\blattice_[a-zA-Z0-9_]+`)

// TestPrometheusScrapesDevStack starts `latticed dev` with a power budget,
// runs jobs on it, starts Debian's Prometheus scraping it every second with
// the shipped alert rules loaded, and evaluates through Prometheus's HTTP
// API every expression of the dashboard (each must return data) and every
// alert rule (each must evaluate without error and name only series the
// stack exports).
func TestPrometheusScrapesDevStack(t *testing.T) {
	skipShort(t)
	ensureTools(t, "prometheus")
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skipf("promtool is here but prometheus is not: %v", err)
	}
	dir := t.TempDir()
	api, metrics := freeAddr(t), freeAddr(t)
	dev := startProc(t, filepath.Join(dir, "dev.log"), "dev", "dev", "--data-dir", filepath.Join(dir, "dev"),
		"--nodes", "16", "--groups", "2", "--api", api, "--metrics", metrics, "--power-budget-kw", "8", "--grace", "1s", "--tenants", "ops")
	t.Cleanup(func() { dev.stop(10 * time.Second) })
	waitHTTP(t, "http://"+metrics+"/readyz", 30*time.Second, dev)

	rules, err := filepath.Abs(deployPath("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n  - job_name: lattice\n    static_configs:\n      - targets: [%q]\n", rules, metrics)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	web := freeAddr(t)
	pl, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	pc := exec.Command(prom, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web, "--storage.tsdb.retention.time=1h")
	pc.Stdout, pc.Stderr = pl, pl
	pc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Process.Kill(); _ = pc.Wait() })
	p := promClient{base: "http://" + web}

	// Real work: short jobs in every vCluster for a while (dev reused the
	// saved test token as its admin token).
	conn, err := grpc.NewClient(api, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearerCreds(testAdminToken)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	allocs := latticev1.NewAllocationServiceClient(conn)
	work := t.TempDir()
	submit := func(i int) {
		vc := []string{"hpc-batch", "ml-training", "interactive"}[i%3]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
			Name: fmt.Sprintf("m%d", i), Tenant: "ops", Vcluster: vc, NodesMin: int32(1 + i%2), WalltimeSeconds: 60,
			Command: []string{"sleep 0.5"}, WorkDir: work}, ClientRequestId: fmt.Sprintf("prom-%d", i)})
		if err != nil {
			t.Errorf("submit: %v", err)
		}
	}
	// One job no node can run waits (BadConstraints): the queue panels
	// have a reason to show. Once the nodes have registered, a request no
	// node can meet is refused unless an admin keeps it, so keep it: the
	// test no longer depends on whether the nodes came first.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := allocs.Submit(ctx, &latticev1.SubmitRequest{Request: &latticev1.AllocationRequest{
		Name: "waits", Tenant: "ops", NodesMin: 1, WalltimeSeconds: 60, Constraints: []string{"no-such-feature"},
		Command: []string{"true"}, WorkDir: work, KeepIfNeverFits: true}}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	cancel()
	deadline := time.Now().Add(25 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		submit(i)
		time.Sleep(300 * time.Millisecond)
	}
	// Let the last jobs start and Prometheus scrape them.
	time.Sleep(3 * time.Second)

	// The target is up.
	if n, err := p.query(`up{job="lattice"} == 1`); err != nil || n != 1 {
		t.Fatalf("Prometheus does not scrape the dev stack (up == 1 gave %d series, %v); log:\n%s", n, err, tail(pl.Name(), 30))
	}
	var names []string
	if err := p.get("/api/v1/label/__name__/values", url.Values{}, &names); err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, n := range names {
		exported[n] = true
	}
	exprs := dashboardExprs(t)
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, err := p.query(exprs[k])
		switch {
		case err != nil:
			t.Errorf("dashboard %q: %s: %v", k, exprs[k], err)
		case n == 0:
			t.Errorf("dashboard %q returns no data: %s", k, exprs[k])
		}
		for _, m := range metricName.FindAllString(exprs[k], -1) {
			if !exported[m] && !slices.Contains(optionalSeries, m) {
				t.Errorf("dashboard %q names %s, which the stack does not export", k, m)
			}
		}
	}
	t.Logf("dashboard: %d expressions evaluated through Prometheus", len(keys))

	// The alert rules as Prometheus loaded and evaluated them.
	var rg struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Query     string `json:"query"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				State     string `json:"state"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{}, &rg); err != nil {
		t.Fatal(err)
	}
	count := 0
	var firing []string
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			count++
			if r.Health != "ok" {
				t.Errorf("alert %s: health %q %s", r.Name, r.Health, r.LastError)
			}
			if _, err := p.query(r.Query); err != nil {
				t.Errorf("alert %s: %v", r.Name, err)
			}
			for _, m := range metricName.FindAllString(r.Query, -1) {
				m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
				if !exported[m] && !exported[m+"_bucket"] && !slices.Contains(optionalSeries, m) {
					t.Errorf("alert %s names %s, which the stack does not export", r.Name, m)
				}
			}
			if r.State != "inactive" {
				firing = append(firing, r.Name+"="+r.State)
			}
		}
	}
	if count < 10 {
		t.Errorf("Prometheus loaded %d alert rules; want the shipped ones", count)
	}
	for _, f := range firing {
		if strings.HasPrefix(f, "LatticeNoLeader") || strings.HasPrefix(f, "LatticeMemberNotReady") {
			t.Errorf("healthy stack, yet %s", f)
		}
	}
	t.Logf("alerts: %d rules loaded and evaluated; pending or firing: %v", count, firing)
}

// optionalSeries are series that exist only once their event happened (a
// counter vector has no series before its first increment; the prediction
// gauges appear once the leader's loop has learnt from a completed window,
// rebuilt at most every 30 s, in a cycle with pending work).
var optionalSeries = []string{"lattice_scheduler_loop_panics_total", "lattice_scheduler_reclaims_total",
	"lattice_scheduler_preemptions_total", "lattice_checkpoints_total",
	"lattice_scheduler_prediction_accuracy", "lattice_scheduler_walltime_accuracy", "lattice_scheduler_prediction_underpredicted_ratio"}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, u string, timeout time.Duration, p *proc) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if p != nil && p.exited() {
			t.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.logPath, 30))
		}
		resp, err := http.Get(u)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not 200 within %s: %s", u, timeout, last)
}

// lockedBuffer is a bytes.Buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
