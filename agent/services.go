package agent

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// Service instances (docs/services.md): an allocation the leader assigns
// with Assignment.service gets LATTICE_SERVICE_PORT, a free port of its
// node, and LATTICE_SERVICE_NAME; while it runs the agent scrapes
// http://127.0.0.1:PORT/metrics (Prometheus text format, parsed by
// prometheus/common/expfmt) for the service's metric and sends the last
// value, and the instance's endpoint, with every heartbeat. Nothing of it
// goes through the Raft log.

// serviceTarget is one instance the agent scrapes.
type serviceTarget struct {
	alloc    uint64
	metric   string
	port     int
	endpoint string
	// added is when it was registered (before its process starts); seen
	// is set once its process was found running: a target is dropped when
	// its process is gone, or never came within a minute.
	added time.Time
	seen  bool
	// last scrape
	has   bool
	value float64
	err   string
}

// serviceScraper holds the instances this agent runs.
type serviceScraper struct {
	mu      sync.Mutex
	targets map[uint64]*serviceTarget
	client  *http.Client
}

func newServiceScraper() *serviceScraper {
	return &serviceScraper{targets: map[uint64]*serviceTarget{}, client: &http.Client{Timeout: 2 * time.Second}}
}

// serviceHost is the host name clients reach this agent's instances at: the
// node's name for an agent of one node, loopback for simulated nodes (they
// all share this host).
func (a *Agent) serviceHost(node string) string {
	if len(a.cfg.Nodes) == 1 {
		return node
	}
	return "127.0.0.1"
}

// prepareService gives a service instance its port and registers it for
// scraping. It reports an error when no port is free.
func (a *Agent) prepareService(l *Launch, as *latticev1.Assignment) error {
	if as.GetService() == "" {
		return nil
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("service port: %w", err)
	}
	l.Env = append(slices.Clip(l.Env), "LATTICE_SERVICE_NAME="+as.GetService(), "LATTICE_SERVICE_PORT="+strconv.Itoa(port))
	t := &serviceTarget{alloc: l.AllocID, metric: as.GetServiceMetric(), port: port, added: time.Now(),
		endpoint: net.JoinHostPort(a.serviceHost(as.LaunchNode), strconv.Itoa(port))}
	a.services.mu.Lock()
	a.services.targets[l.AllocID] = t
	a.services.mu.Unlock()
	return nil
}

// freePort asks the kernel for a free TCP port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// serviceSamples is what the heartbeat carries: one sample per instance
// running here, in allocation order.
func (a *Agent) serviceSamples() []*latticev1.ServiceSample {
	a.services.mu.Lock()
	defer a.services.mu.Unlock()
	out := make([]*latticev1.ServiceSample, 0, len(a.services.targets))
	for _, t := range a.services.targets {
		out = append(out, &latticev1.ServiceSample{AllocationId: t.alloc, Endpoint: t.endpoint, HasValue: t.has, Value: t.value, Error: t.err})
	}
	slices.SortFunc(out, func(x, y *latticev1.ServiceSample) int { return cmp.Compare(x.AllocationId, y.AllocationId) })
	return out
}

// scrapeServices scrapes every instance every interval until ctx ends,
// dropping the instances that no longer run here.
func (a *Agent) scrapeServices(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.services.mu.Lock()
		targets := make([]*serviceTarget, 0, len(a.services.targets))
		for id, t := range a.services.targets {
			if !a.runner.IsRunning(id) {
				if t.seen || time.Since(t.added) > time.Minute {
					delete(a.services.targets, id)
				}
				continue
			}
			t.seen = true
			targets = append(targets, t)
		}
		a.services.mu.Unlock()
		for _, t := range targets {
			if t.metric == "" {
				continue
			}
			v, err := a.services.scrape(ctx, t.port, t.metric)
			a.services.mu.Lock()
			t.has, t.value, t.err = err == nil, v, ""
			if err != nil {
				t.err = err.Error()
			}
			a.services.mu.Unlock()
		}
	}
}

// scrape reads metric from an instance's /metrics: the sum of its series
// (one series is the usual case; several, e.g. per worker, add up).
func (s *serviceScraper) scrape(ctx context.Context, port int, metric string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseServiceMetric(io.LimitReader(resp.Body, 4<<20), metric)
}

// parseServiceMetric finds metric in a Prometheus text exposition.
func parseServiceMetric(r io.Reader, metric string) (float64, error) {
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("parse /metrics: %w", err)
	}
	fam, ok := fams[metric]
	if !ok || len(fam.GetMetric()) == 0 {
		return 0, fmt.Errorf("no series %s in /metrics", metric)
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		sum += metricValue(fam.GetType(), m)
	}
	return sum, nil
}

func metricValue(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue()
	case dto.MetricType_SUMMARY:
		return m.GetSummary().GetSampleSum()
	case dto.MetricType_HISTOGRAM:
		return m.GetHistogram().GetSampleSum()
	}
	return 0
}
