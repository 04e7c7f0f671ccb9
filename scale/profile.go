package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profileLeader saves the leader's Go profiles over the measuring window
// in DIR/profiles: a CPU profile and the mutex and block profiles (as
// deltas over the window), and at its end the heap and the goroutines.
// The members run with --pprof (mutex and block profiling on). Errors are
// reported through log; profiles are a help, never a failure of the run.
func profileLeader(ctx context.Context, addr, dir string, window time.Duration, log func(string, ...any)) *sync.WaitGroup {
	var wg sync.WaitGroup
	if window < 2*time.Second {
		return &wg
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log("profiles: %v", err)
		return &wg
	}
	secs := int(window.Seconds())
	client := &http.Client{Timeout: window + 30*time.Second}
	get := func(name, path string) {
		defer wg.Done()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			log("profile %s: %v", name, err)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			log("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			log("profile %s: %s", name, resp.Status)
			return
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err == nil {
			_, err = io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			log("profile %s: %v", name, err)
		}
	}
	wg.Add(3)
	go get("leader-cpu.pprof", fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs))
	go get("leader-mutex.pprof", fmt.Sprintf("/debug/pprof/mutex?seconds=%d", secs))
	go get("leader-block.pprof", fmt.Sprintf("/debug/pprof/block?seconds=%d", secs))
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(window):
		}
		wg.Add(2)
		go get("leader-heap.pprof", "/debug/pprof/heap")
		go get("leader-goroutine.txt", "/debug/pprof/goroutine?debug=1")
	}()
	return &wg
}
