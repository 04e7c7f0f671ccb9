package server

import (
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// hashicorp/raft and raft-boltdb report through go-metrics, which is
// process-global. One Prometheus sink is installed per process, on a
// registry of its own that every member's /metrics gathers next to its own
// registry. Names come out as lattice_raft_*, lattice_raft_boltdb_*.
var (
	raftMetricsOnce sync.Once
	raftRegistry    = prometheus.NewRegistry()
)

func installRaftMetrics(log func(msg string, args ...any)) {
	raftMetricsOnce.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: raftRegistry})
		if err != nil {
			log("raft metrics unavailable", "err", err)
			return
		}
		conf := gometrics.DefaultConfig("lattice")
		conf.EnableHostname = false
		conf.EnableHostnameLabel = false
		conf.EnableRuntimeMetrics = false
		conf.EnableServiceLabel = false
		if _, err := gometrics.NewGlobal(conf, sink); err != nil {
			log("raft metrics unavailable", "err", err)
		}
	})
}
