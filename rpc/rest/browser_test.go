package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/cli"
)

// The dashboard in a real browser: Debian's chromium, headless, driven
// through the DevTools protocol. The test skips, saying why, when chromium
// is missing and cannot be installed. With LATTICE_DASHBOARD_SCREENSHOTS=DIR
// it also saves a screenshot of each page there (docs/img holds them).

// browser starts a headless chromium with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		out, err := exec.Command("sh", filepath.Join("..", "..", "scripts", "install-test-tools.sh"), "chromium").CombinedOutput()
		if p, lerr := exec.LookPath("chromium"); lerr == nil {
			path = p
		} else {
			t.Skipf("the dashboard tests need chromium, which scripts/install-test-tools.sh could not install here: %v\n%s", err, out)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1366, 860),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// pageText is the text of the first element matching sel ("" when none).
func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := fmt.Sprintf(`(function(){const e=document.querySelector(%q);return e?e.textContent:""})()`, sel)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// waitPage polls until the element sel holds want (or, with want "", exists).
func waitPage(t *testing.T, ctx context.Context, sel, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		js := fmt.Sprintf(`document.querySelector(%q)!==null`, sel)
		exists, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatalf("look for %s: %v", sel, err)
		}
		if exists {
			if txt := pageText(t, ctx, sel); strings.Contains(txt, want) {
				return txt
			}
		}
		if time.Now().After(deadline) {
			url, _ := chromedp.Run(ctx, chromedp.Location())
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("timed out waiting for %s to show %q at %s; the page shows:\n%s", sel, want, url, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// screenshot saves the page as DIR/dashboard-NAME.png when asked to.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("LATTICE_DASHBOARD_SCREENSHOTS")
	if dir == "" {
		return
	}
	time.Sleep(300 * time.Millisecond)
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loginAs logs the browser in through a one-time link made for who.
func (s *stack) loginAs(t *testing.T, ctx context.Context, who string) {
	t.Helper()
	login, err := latticev1.NewDashboardServiceClient(s.conn).CreateLogin(s.as(who), &latticev1.CreateDashboardLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	navigate(t, ctx, login.Url)
	waitPage(t, ctx, "#whoami", who, 20*time.Second)
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(url, "code=") || !strings.HasSuffix(url, "/ui/") {
		t.Fatalf("after login the address is %s: the code must not stay in it", url)
	}
}

func TestDashboardInBrowser(t *testing.T) {
	ctx := browser(t)
	s := startStack(t)

	// Work to look at: bob's job held in the queue (its explanation waits
	// for the scheduler), alice's job that prints a line every 300 ms, and a
	// checkpointable ml-training job too wide for its own 4 nodes, which
	// borrows 2 of hpc-batch's.
	held := s.submit(t, "bob", map[string]any{"name": "bobs-secret", "tenant": "bio", "nodes_min": 1, "walltime_seconds": 600,
		"begin_unix_ms": time.Now().Add(2 * time.Hour).UnixMilli(), "command": []string{"true"}})
	talker := s.submit(t, "alice", map[string]any{"name": "talker", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 600,
		"command": []string{"i=1; while [ $i -le 80 ]; do echo line-$i; i=$((i+1)); sleep 0.3; done"}})
	borrower := s.submit(t, "root", map[string]any{"name": "borrower", "tenant": "physics", "vcluster": "ml-training", "nodes_min": 6,
		"walltime_seconds": 600, "checkpoint": "signal", "command": []string{"sleep 300"}})

	s.loginAs(t, ctx, "root")

	t.Run("the queue lists a job just submitted", func(t *testing.T) {
		waitPage(t, ctx, fmt.Sprintf(`#queue tr[data-id="%s"]`, held), "bobs-secret", 30*time.Second)
		fresh := s.submit(t, "alice", map[string]any{"name": "just-now", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60,
			"begin_unix_ms": time.Now().Add(time.Hour).UnixMilli(), "command": []string{"true"}})
		// No reload: the page hears of it through the event stream.
		waitPage(t, ctx, fmt.Sprintf(`#queue tr[data-id="%s"]`, fresh), "just-now", 30*time.Second)
		// An array's tasks are one row until opened.
		sweep := s.submit(t, "alice", map[string]any{"name": "sweep", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60,
			"array": map[string]any{"start": 0, "end": 5, "step": 1}, "begin_unix_ms": time.Now().Add(time.Hour).UnixMilli(), "command": []string{"true"}})
		waitPage(t, ctx, fmt.Sprintf(`#queue tr[data-array="%s"]`, sweep), "6 tasks", 30*time.Second)
		if txt := pageText(t, ctx, "#queue"); strings.Contains(txt, sweep+"_3") {
			t.Fatalf("the array's tasks are listed one by one before the row is opened:\n%s", txt)
		}
		screenshot(t, ctx, "queue")
		click(t, ctx, fmt.Sprintf(`#queue tr[data-array="%s"] button.toggle`, sweep))
		waitPage(t, ctx, fmt.Sprintf(`#queue tr[data-id="%s_3"]`, sweep), "sweep", 10*time.Second)
	})

	t.Run("a job page shows f1 to f9 and the expected start", func(t *testing.T) {
		navigate(t, ctx, s.base+"/ui/#/job/"+held)
		for i := 1; i <= 9; i++ {
			waitPage(t, ctx, fmt.Sprintf(`#explain tr[data-factor="f%d"]`, i), fmt.Sprintf("f%d", i), 30*time.Second)
		}
		waitPage(t, ctx, "#expected-start", "Expected start", 5*time.Second)
		waitPage(t, ctx, "#history", "PENDING", 5*time.Second)
	})

	t.Run("a running job's log follows", func(t *testing.T) {
		s.waitState(t, "alice", talker, "RUNNING")
		navigate(t, ctx, s.base+"/ui/#/job/"+talker)
		first := waitPage(t, ctx, "#log", "line-2\n", 30*time.Second)
		if strings.Contains(first, "line-80") {
			t.Fatalf("the job ended before the page showed its log: %q", first)
		}
		// Later lines arrive on the same page, without a reload.
		later := waitPage(t, ctx, "#log", "line-25\n", 40*time.Second)
		if !strings.HasPrefix(later, "line-1\nline-2\n") {
			t.Fatalf("the followed log: %q", later)
		}
		screenshot(t, ctx, "job-log")
	})

	t.Run("the nodes view shows a borrowed node as borrowed", func(t *testing.T) {
		a := s.waitState(t, "root", borrower, "RUNNING")
		home := map[string]string{}
		for _, n := range s.call(t, "root", "GET", "/api/v1/nodes", nil).json(t)["nodes"].([]any) {
			m := n.(map[string]any)
			home[m["name"].(string)] = m["home_vcluster"].(string)
		}
		lent := ""
		for _, n := range a["nodes"].([]any) {
			if home[n.(string)] == "hpc-batch" {
				lent = n.(string)
			}
		}
		if lent == "" {
			t.Fatalf("the borrower runs on %v: no hpc-batch node (homes %v)", a["nodes"], home)
		}
		navigate(t, ctx, s.base+"/ui/#/nodes")
		tile := waitPage(t, ctx, fmt.Sprintf(`button[data-node="%s"]`, lent), "borrowed from hpc-batch", 30*time.Second)
		if !strings.Contains(tile, "busy") {
			t.Fatalf("lent node tile: %q", tile)
		}
		// Grouped by dragonfly group, then by the vCluster using the node.
		waitPage(t, ctx, fmt.Sprintf(`section[data-group] div[data-vcluster="ml-training"] button[data-node="%s"]`, lent), lent, 5*time.Second)
		screenshot(t, ctx, "nodes")
	})

	t.Run("an admin's drain from the page reaches latticectl nodes", func(t *testing.T) {
		navigate(t, ctx, s.base+"/ui/#/nodes")
		click(t, ctx, `button[data-node="node001"]`)
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#drain-reason"), "bad fan in rack 3")); err != nil {
			t.Fatal(err)
		}
		click(t, ctx, `#node-admin button[data-action="drain"]`)
		waitPage(t, ctx, `button[data-node="node001"]`, "Drain", 20*time.Second)
		var out, errOut strings.Builder
		env := cli.OSEnv()
		env.Stdout, env.Stderr, env.Stdin = &out, &errOut, strings.NewReader("")
		env.Getenv = func(string) string { return "" }
		if code := cli.Main(context.Background(), env, []string{"--server", s.srv.APIAddr(), "--token", s.tokens["root"], "nodes", "-o", "json"}); code != 0 {
			t.Fatalf("latticectl nodes: exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "bad fan in rack 3") {
			t.Fatalf("latticectl nodes does not show the drain:\n%s", out.String())
		}
		click(t, ctx, `#node-admin button[data-action="undrain"]`)
		waitPage(t, ctx, `button[data-node="node001"]`, "Ready", 20*time.Second)
	})

	dagID := ""
	wide := s.submit(t, "alice", map[string]any{"name": "next-in-line", "tenant": "physics", "vcluster": "ml-training", "nodes_min": 4,
		"walltime_seconds": 1800, "checkpoint": "signal", "command": []string{"true"}})
	// The other pages, with a power budget, fair-share targets, a workflow
	// and a job waiting for nodes to show.
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/api/v1/power/budget", `{"budget_watts": 4000}`},
		{"PUT", "/api/v1/tenants/physics", `{"fair_share_target": 0.6}`},
		{"PUT", "/api/v1/tenants/bio", `{"fair_share_target": 0.4}`},
		{"POST", "/api/v1/dags", `{"name": "pipeline", "stages": [
			{"name": "fetch", "request": {"name": "fetch", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": ["sleep 2"]}},
			{"name": "train", "request": {"name": "train", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": ["sleep 2"]}, "depends_on": [{"name": "fetch", "condition": "afterok"}]},
			{"name": "score", "request": {"name": "score", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": ["true"]}, "depends_on": [{"name": "fetch", "condition": "afterok"}]},
			{"name": "report", "request": {"name": "report", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": ["true"]}, "depends_on": [{"name": "train", "condition": "afterok"}, {"name": "score", "condition": "afterany"}]}]}`},
	} {
		r := s.call(t, "root", c.method, c.path, c.body)
		if r.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		if c.path == "/api/v1/dags" {
			dagID = fmt.Sprint(r.json(t)["dag_id"])
		}
	}
	navigate(t, ctx, s.base+"/ui/#/job/"+wide)
	waitPage(t, ctx, `#explain tr[data-factor="f9"]`, "f9", 30*time.Second)
	// It waits for the borrower's nodes: the plan gives it a start time.
	waitPage(t, ctx, "#expected-start", " (in ", 30*time.Second)
	screenshot(t, ctx, "job")
	for _, page := range []string{"power", "history", "tenants", "dags/" + dagID} {
		navigate(t, ctx, s.base+"/ui/#/"+page)
		waitPage(t, ctx, "main h1", "", 10*time.Second)
		if page == "power" {
			waitPage(t, ctx, "#power-chart", "", 20*time.Second)
		}
		if page == "tenants" {
			waitPage(t, ctx, `#tenants tr[data-tenant="physics"]`, "physics", 10*time.Second)
		}
		if page == "dags/"+dagID {
			waitPage(t, ctx, `#dag g[data-stage="report"]`, "report", 10*time.Second)
		}
		screenshot(t, ctx, strings.TrimSuffix(page, "/"+dagID))
	}

	t.Run("a user cannot see another tenant's job", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#logout button"))); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, "body", "paste a token", 10*time.Second)
		screenshot(t, ctx, "login")
		s.loginAs(t, ctx, "alice")
		navigate(t, ctx, s.base+"/ui/#/queue")
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#f-state"), ""),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#f-state').dispatchEvent(new Event('input'))`)); err != nil {
			t.Fatal(err)
		}
		waitPage(t, ctx, fmt.Sprintf(`#queue tr[data-id="%s"]`, talker), "talker", 30*time.Second)
		if txt := pageText(t, ctx, "#queue"); strings.Contains(txt, "bobs-secret") {
			t.Fatalf("alice's queue shows bob's job:\n%s", txt)
		}
		navigate(t, ctx, s.base+"/ui/#/job/"+held)
		msg := waitPage(t, ctx, "#job-error", "", 20*time.Second)
		if strings.Contains(pageText(t, ctx, "main"), "bobs-secret") {
			t.Fatalf("alice's job page shows bob's job")
		}
		js := fmt.Sprintf(`fetch('/api/v1/allocations/%s',{credentials:'same-origin'}).then(r=>r.status)`, held)
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusForbidden && status != http.StatusNotFound {
			t.Fatalf("alice's session GETs bob's allocation: %d (page said %q)", status, msg)
		}
	})
}
