package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// servePprof serves Go's profiles under /debug/pprof/ on addr, a loopback
// address (an agent's --pprof-addr; members serve them on their metrics
// address with --pprof).
func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return usageError{fmt.Errorf("--pprof-addr %q: want a loopback HOST:PORT such as 127.0.0.1:6060", addr)}
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() {
		if err := http.Serve(l, mux); err != nil {
			slog.Warn("pprof server stopped", "err", err)
		}
	}()
	return nil
}
