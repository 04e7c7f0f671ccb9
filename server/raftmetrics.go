package server

import (
	"slices"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// hashicorp/raft and raft-boltdb report through go-metrics, which is
// process-global. One Prometheus sink is installed per process, on a
// registry of its own that every member's /metrics gathers next to its own
// registry. Names come out as lattice_raft_*, lattice_raft_boltdb_*.
//
// go-metrics turns Raft's timings into summaries, which cannot be
// aggregated across members; a second sink turns the ones the metrics
// contract names into histograms: lattice_raft_commit_duration_seconds
// (raft.commitTime, leader only) and lattice_raft_fsm_apply_duration_seconds
// (raft.fsm.applyBatch, as the FSM applies in batches; raft.fsm.apply).
var (
	raftMetricsOnce sync.Once
	raftRegistry    = prometheus.NewRegistry()

	raftCommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lattice_raft_commit_duration_seconds",
		Help:    "Time from a log entry's dispatch to its commit by a majority, on the leader (raft.commitTime).",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)})
	raftApplySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lattice_raft_fsm_apply_duration_seconds",
		Help:    "Time to apply one batch of committed entries to the state machine (raft.fsm.apply).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
)

func installRaftMetrics(log func(msg string, args ...any)) {
	raftMetricsOnce.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: raftRegistry})
		if err != nil {
			log("raft metrics unavailable", "err", err)
			return
		}
		raftRegistry.MustRegister(raftCommitSeconds, raftApplySeconds)
		conf := gometrics.DefaultConfig("lattice")
		conf.EnableHostname = false
		conf.EnableHostnameLabel = false
		conf.EnableRuntimeMetrics = false
		conf.EnableServiceLabel = false
		if _, err := gometrics.NewGlobal(conf, gometrics.FanoutSink{sink, histogramSink{}}); err != nil {
			log("raft metrics unavailable", "err", err)
		}
	})
}

// histogramSink feeds the histograms above from go-metrics samples (in
// milliseconds); it ignores everything else.
type histogramSink struct{}

func hasSuffix(key []string, suffix ...string) bool {
	return len(key) >= len(suffix) && slices.Equal(key[len(key)-len(suffix):], suffix)
}

func (histogramSink) AddSample(key []string, val float32) {
	switch {
	case hasSuffix(key, "raft", "commitTime"):
		raftCommitSeconds.Observe(float64(val) / 1000)
	case hasSuffix(key, "raft", "fsm", "apply"), hasSuffix(key, "raft", "fsm", "applyBatch"):
		// Our FSM applies in batches: hashicorp/raft then times each batch
		// as raft.fsm.applyBatch and never reports raft.fsm.apply.
		raftApplySeconds.Observe(float64(val) / 1000)
	}
}
func (h histogramSink) AddSampleWithLabels(key []string, val float32, _ []gometrics.Label) {
	h.AddSample(key, val)
}
func (histogramSink) SetGauge([]string, float32)                                 {}
func (histogramSink) SetGaugeWithLabels([]string, float32, []gometrics.Label)    {}
func (histogramSink) EmitKey([]string, float32)                                  {}
func (histogramSink) IncrCounter([]string, float32)                              {}
func (histogramSink) IncrCounterWithLabels([]string, float32, []gometrics.Label) {}
