package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var dashboardLink = regexp.MustCompile(`dashboard \(one-time login link, as admin [^)]*\): (http://\S+/ui/login\?code=\S+)`)

// TestDevDemoDashboard: `latticed dev --demo` prints a one-time dashboard
// link; opening it logs the browser in (a session cookie, the code gone
// from the address) and the dashboard's API shows the demo's jobs.
func TestDevDemoDashboard(t *testing.T) {
	skipShort(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "dev.log")
	dev := startProc(t, logPath, "dev", "dev", "--data-dir", filepath.Join(dir, "dev"), "--nodes", "64", "--groups", "4",
		"--api", freeAddr(t), "--metrics", "", "--http", "127.0.0.1:0", "--grace", "1s", "--demo")
	t.Cleanup(func() { dev.stop(15 * time.Second) })
	var link string
	deadline := time.Now().Add(60 * time.Second)
	for link == "" {
		b, _ := os.ReadFile(logPath)
		if m := dashboardLink.FindSubmatch(b); m != nil {
			link = string(m[1])
			break
		}
		if dev.exited() || time.Now().After(deadline) {
			t.Fatalf("latticed dev printed no dashboard link:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.Get(link) // follows the redirect to /ui/
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(resp.Request.URL.String(), "code=") || !strings.Contains(string(page), "app.js") {
		t.Fatalf("opening %s: %d at %s:\n%s", link, resp.StatusCode, resp.Request.URL, page)
	}
	base := strings.TrimSuffix(resp.Request.URL.String(), "/ui/")
	want := []string{"hello", "two-nodes", "wide", "sweep", "training", "fails"}
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := browser.Get(base + "/api/v1/allocations?terminal_window_seconds=3600")
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Allocations []struct {
				Request struct {
					Name string `json:"name"`
				} `json:"request"`
			} `json:"allocations"`
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the dashboard's listing: %d %v", resp.StatusCode, err)
		}
		seen := map[string]bool{}
		for _, a := range list.Allocations {
			seen[a.Request.Name] = true
		}
		missing := []string{}
		for _, n := range want {
			if !seen[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard does not show the demo's %v (it shows %v)", missing, seen)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
