// Command inference-server is a small stand-in for an inference server, to
// run as a Lattice service (docs/services.md): it serves on
// $LATTICE_SERVICE_PORT, answers POST/GET /infer (a request that takes
// ?ms= milliseconds, 20 by default, as a model's forward pass would), and
// /healthz ("ok pid N"), and exposes on /metrics the gauge inference_load: the requests in flight,
// plus the number in the file $LOAD_FILE when set (a load imposed from
// outside, for demonstrations and tests). Scale it with
// --scale-metric inference_load --scale-target N.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	port := os.Getenv("LATTICE_SERVICE_PORT")
	if port == "" {
		port = "8080"
	}
	var inflight atomic.Int64
	loadFile := os.Getenv("LOAD_FILE")
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "inference_load", Help: "Requests in flight (plus the load of $LOAD_FILE)."},
		func() float64 { return float64(inflight.Load()) + fileLoad(loadFile) }))
	served := prometheus.NewCounter(prometheus.CounterOpts{Name: "inference_requests_total", Help: "Requests answered."})
	reg.MustRegister(served)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/infer", func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Add(-1)
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 {
			ms = 20
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		served.Inc()
		host, _ := os.Hostname()
		fmt.Fprintf(w, "answer from %s:%s (%s)\n", host, port, os.Getenv("LATTICE_ALLOC_ID"))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "ok pid %d\n", os.Getpid()) })
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("inference-server listening on %s", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}

// fileLoad reads a number from path (0 when unset, missing or not a number).
func fileLoad(path string) float64 {
	if path == "" {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0
	}
	return v
}
