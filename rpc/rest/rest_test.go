package rest_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/cli"
)

// TestRESTAPI drives every resource of /api/v1/ with plain HTTP requests,
// the way curl would, and checks the errors: 401 without or with a bad
// credential, 403 for what the caller may not do, 404 for what is not
// there, 400 naming the field.
func TestRESTAPI(t *testing.T) {
	s := startStack(t)

	// alice (physics) runs a job that prints; bob (bio) has a pending one
	// held from the start.
	mine := s.submit(t, "alice", map[string]any{"name": "hello", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60,
		"command": []string{"echo hello from rest; sleep 1"}})
	theirs := s.submit(t, "bob", map[string]any{"name": "secret", "tenant": "bio", "nodes_min": 1, "walltime_seconds": 60,
		"hold": true, "command": []string{"true"}})
	s.waitState(t, "alice", mine, "COMPLETED")

	t.Run("every resource answers", func(t *testing.T) {
		for _, path := range []string{
			"/api/v1/allocations", "/api/v1/allocations/" + mine, "/api/v1/allocations/" + theirs + "/explain",
			"/api/v1/allocations/" + mine + "/logs", "/api/v1/history?states=COMPLETED", "/api/v1/nodes", "/api/v1/vclusters",
			"/api/v1/tenants", "/api/v1/power", "/api/v1/power/history", "/api/v1/dags", "/api/v1/qos", "/api/v1/quorum", "/api/v1/whoami", "/api/v1/openapi.json",
		} {
			if r := s.call(t, "root", "GET", path, nil); r.status != http.StatusOK {
				t.Errorf("GET %s: %d %s", path, r.status, r.body)
			}
		}
	})

	t.Run("power over time", func(t *testing.T) {
		h := s.call(t, "alice", "GET", "/api/v1/power/history", nil).json(t)
		samples := h["samples"].([]any)
		if len(samples) == 0 || h["interval_ms"] != "10000" {
			t.Fatalf("power history: %v", h)
		}
		first := samples[0].(map[string]any)
		if first["time_unix_ms"] == "0" || first["estimated_watts"] == nil {
			t.Fatalf("power sample: %v", first)
		}
	})

	t.Run("allocations list and show what status shows", func(t *testing.T) {
		list := s.call(t, "root", "GET", "/api/v1/allocations?terminal_window_seconds=3600", nil).json(t)
		ids := map[string]string{}
		for _, a := range list["allocations"].([]any) {
			m := a.(map[string]any)
			ids[m["display_id"].(string)] = m["state"].(string)
		}
		if ids[mine] != "COMPLETED" || ids[theirs] != "PENDING" {
			t.Fatalf("listing: %v", ids)
		}
		a := s.call(t, "alice", "GET", "/api/v1/allocations/"+mine, nil).json(t)
		req := a["request"].(map[string]any)
		if req["name"] != "hello" || req["user"] != "alice" || req["tenant"] != "physics" || a["exit_code"] != float64(0) {
			t.Fatalf("allocation %s: %v", mine, a)
		}
		if h := a["history"].([]any); len(h) < 2 {
			t.Fatalf("state history: %v", h)
		}
	})

	t.Run("logs", func(t *testing.T) {
		r := s.call(t, "alice", "GET", "/api/v1/allocations/"+mine+"/logs", nil)
		chunk := map[string]any{}
		var out strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
			if err := jsonUnmarshal([]byte(line), &chunk); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			res := chunk["result"].(map[string]any)
			data, _ := base64.StdEncoding.DecodeString(res["data"].(string))
			out.Write(data)
		}
		if out.String() != "hello from rest\n" {
			t.Fatalf("logs: %q (raw %s)", out.String(), r.body)
		}
	})

	t.Run("explain has f1 to f9 and an expected start", func(t *testing.T) {
		x := s.call(t, "bob", "GET", "/api/v1/allocations/"+theirs+"/explain", nil).json(t)
		names := map[string]bool{}
		for _, f := range x["factors"].([]any) {
			names[f.(map[string]any)["name"].(string)] = true
		}
		for i := 1; i <= 9; i++ {
			if !names[fmt.Sprintf("f%d", i)] {
				t.Fatalf("explain lacks f%d: %s", i, x)
			}
		}
		if _, ok := x["expected_start_unix_ms"]; !ok {
			t.Fatalf("explain lacks expected_start_unix_ms: %v", x)
		}
	})

	t.Run("tenant isolation is the gRPC API's", func(t *testing.T) {
		list := s.call(t, "alice", "GET", "/api/v1/allocations?terminal_window_seconds=3600", nil).json(t)
		for _, a := range list["allocations"].([]any) {
			if a.(map[string]any)["display_id"] == theirs {
				t.Fatalf("alice lists bob's allocation %s", theirs)
			}
		}
		r := s.call(t, "alice", "GET", "/api/v1/allocations/"+theirs, nil)
		if r.status != http.StatusForbidden && r.status != http.StatusNotFound {
			t.Fatalf("alice GETs bob's allocation: %d %s", r.status, r.body)
		}
		_, grpcErr := latticev1.NewAllocationServiceClient(s.conn).Get(s.as("alice"), &latticev1.GetAllocationRequest{Id: theirs})
		if grpcErr == nil {
			t.Fatal("gRPC lets alice see bob's allocation")
		}
		// A client cannot smuggle the members' forwarding metadata in.
		req, _ := http.NewRequest("GET", s.base+"/api/v1/allocations/"+theirs, nil)
		req.Header.Set("Authorization", "Bearer "+s.tokens["alice"])
		req.Header.Set("Grpc-Metadata-X-Lattice-Forwarded", "1")
		req.Header.Set("Grpc-Metadata-X-Lattice-On-Behalf-Of", `{"User":"root","Role":"admin","MaxPriority":-1}`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("forged forwarding headers let alice read bob's allocation")
		}
	})

	t.Run("401", func(t *testing.T) {
		for _, who := range []string{"", "not-a-token"} {
			r := s.call(t, who, "GET", "/api/v1/allocations", nil)
			if r.status != http.StatusUnauthorized || !strings.Contains(r.json(t)["message"].(string), "refused") {
				t.Errorf("credential %q: %d %s", who, r.status, r.body)
			}
		}
	})

	t.Run("403", func(t *testing.T) {
		r := s.call(t, "alice", "POST", "/api/v1/nodes/node001/drain", map[string]any{"reason": "mine now"})
		if r.status != http.StatusForbidden || !strings.Contains(r.json(t)["message"].(string), "alice") {
			t.Fatalf("alice drains: %d %s", r.status, r.body)
		}
		r = s.call(t, "alice", "POST", "/api/v1/allocations", map[string]any{"request": map[string]any{"tenant": "bio", "nodes_min": 1, "command": []string{"true"}}})
		if r.status != http.StatusForbidden || !strings.Contains(r.json(t)["message"].(string), "bio") {
			t.Fatalf("alice submits to bio: %d %s", r.status, r.body)
		}
	})

	t.Run("404", func(t *testing.T) {
		r := s.call(t, "root", "GET", "/api/v1/allocations/999999", nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.json(t)["message"].(string), "999999") {
			t.Fatalf("missing allocation: %d %s", r.status, r.body)
		}
		if r := s.call(t, "root", "GET", "/api/v1/no-such-thing", nil); r.status != http.StatusNotFound {
			t.Fatalf("unknown route: %d %s", r.status, r.body)
		}
		if r := s.call(t, "root", "POST", "/api/v1/nodes/nosuchnode/drain", map[string]any{}); r.status != http.StatusNotFound {
			t.Fatalf("drain a missing node: %d %s", r.status, r.body)
		}
	})

	t.Run("400 names the field", func(t *testing.T) {
		for _, c := range []struct {
			method, path string
			body         any
			field        string
		}{
			{"POST", "/api/v1/allocations", map[string]any{"request": map[string]any{"nodez": 1}}, "nodez"},
			{"POST", "/api/v1/allocations", map[string]any{"request": map[string]any{"tenant": "physics", "nodes_min": -1, "command": []string{"true"}}}, "nodes"},
			{"GET", "/api/v1/allocations?page_size=many", nil, "page_size"},
			{"POST", "/api/v1/allocations", "{not json", "invalid character"},
			{"GET", "/api/v1/events?colour=red", nil, "colour"},
		} {
			r := s.call(t, "alice", c.method, c.path, c.body)
			if r.status != http.StatusBadRequest || !strings.Contains(strings.ToLower(r.json(t)["message"].(string)), c.field) {
				t.Errorf("%s %s: %d %s, want 400 naming %s", c.method, c.path, r.status, r.body, c.field)
			}
		}
	})

	t.Run("actions: hold, release, cancel, drain, undrain", func(t *testing.T) {
		id := s.submit(t, "bob", map[string]any{"name": "later", "tenant": "bio", "nodes_min": 1, "walltime_seconds": 60,
			"begin_unix_ms": time.Now().Add(time.Hour).UnixMilli(), "command": []string{"true"}})
		for _, verb := range []string{"hold", "release"} {
			r := s.call(t, "bob", "POST", "/api/v1/allocations/"+verb, map[string]any{"ids": []string{id}})
			if res := r.json(t)["results"].([]any)[0].(map[string]any); r.status != 200 || res["ok"] != true {
				t.Fatalf("%s: %d %s", verb, r.status, r.body)
			}
		}
		// alice may not cancel bob's job; bob may.
		r := s.call(t, "alice", "POST", "/api/v1/allocations/cancel", map[string]any{"ids": []string{id}})
		if r.status == 200 && r.json(t)["results"].([]any)[0].(map[string]any)["cancelled"] == true {
			t.Fatalf("alice cancelled bob's job: %s", r.body)
		}
		r = s.call(t, "bob", "POST", "/api/v1/allocations/cancel", map[string]any{"ids": []string{id}})
		if r.status != 200 || r.json(t)["results"].([]any)[0].(map[string]any)["cancelled"] != true {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		r = s.call(t, "root", "POST", "/api/v1/nodes/node002/drain", map[string]any{"reason": "fan"})
		if r.status != 200 {
			t.Fatalf("drain: %d %s", r.status, r.body)
		}
		if st := r.json(t)["node"].(map[string]any)["state"]; st != "Drained" && st != "Draining" {
			t.Fatalf("drained node state %v", st)
		}
		if r := s.call(t, "root", "POST", "/api/v1/nodes/node002/undrain", map[string]any{}); r.status != 200 {
			t.Fatalf("undrain: %d %s", r.status, r.body)
		}
	})

	t.Run("workflows", func(t *testing.T) {
		r := s.call(t, "alice", "POST", "/api/v1/dags", map[string]any{"name": "pipe", "stages": []any{
			map[string]any{"name": "a", "request": map[string]any{"name": "a", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": []string{"true"}}},
			map[string]any{"name": "b", "request": map[string]any{"name": "b", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": []string{"true"}},
				"depends_on": []any{map[string]any{"name": "a", "condition": "afterok"}}},
		}})
		if r.status != 200 {
			t.Fatalf("submit dag: %d %s", r.status, r.body)
		}
		id := fmt.Sprint(r.json(t)["dag_id"])
		d := s.call(t, "alice", "GET", "/api/v1/dags/"+id, nil)
		if d.status != 200 || len(d.json(t)["allocations"].([]any)) != 2 {
			t.Fatalf("get dag: %d %s", d.status, d.body)
		}
	})

	t.Run("events stream what the caller may see", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+s.tokens["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("events: %d %s", resp.StatusCode, ct)
		}
		fresh := ""
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		event, sawNode := "", false
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = v
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			switch event {
			case "node":
				sawNode = true
				if fresh == "" {
					// The first look is out (nodes come after the
					// allocations): a submission now is a change.
					fresh = s.submit(t, "alice", map[string]any{"name": "fresh", "tenant": "physics", "nodes_min": 1, "walltime_seconds": 60, "command": []string{"sleep 1"}})
				}
			case "allocation":
				m := map[string]any{}
				if err := jsonUnmarshal([]byte(data), &m); err != nil {
					t.Fatal(err)
				}
				if m["display_id"] == theirs {
					t.Fatalf("alice's event stream shows bob's allocation: %s", data)
				}
				if fresh != "" && m["display_id"] == fresh && sawNode {
					return
				}
			}
		}
		t.Fatalf("no event for the fresh allocation %q (node events: %v): %v", fresh, sawNode, sc.Err())
	})
}

// TestDashboardLogin checks the Jupyter-style login: a one-time code made
// for the caller is exchanged for an HttpOnly session cookie, leaves the
// address, works once, and the session acts as the caller; a pasted token
// logs in the same way; logging out ends the session.
func TestDashboardLogin(t *testing.T) {
	s := startStack(t)
	dash := latticev1.NewDashboardServiceClient(s.conn)
	login, err := dash.CreateLogin(s.as("alice"), &latticev1.CreateDashboardLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(login.Url)
	if err != nil || u.Host != strings.TrimPrefix(s.base, "http://") || u.Path != "/ui/login" || u.Query().Get("code") != login.Code {
		t.Fatalf("login url %q", login.Url)
	}
	if _, err := dash.CreateLogin(context.Background(), &latticev1.CreateDashboardLoginRequest{}); err == nil {
		t.Fatal("a login code without a credential")
	}

	browser := browserClient(t)
	r := s.callWith(t, browser, "", "GET", "/ui/login?code="+url.QueryEscape(login.Code), nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/" {
		t.Fatalf("code exchange: %d %v", r.status, r.header)
	}
	cookie := r.header.Get("Set-Cookie")
	for _, want := range []string{"lattice_session=lsess_", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Fatalf("cookie %q lacks %s", cookie, want)
		}
	}
	who := s.callWith(t, browser, "", "GET", "/api/v1/whoami", nil).json(t)
	if who["user"] != "alice" || who["role"] != "user" {
		t.Fatalf("session acts as %v", who)
	}
	// The session carries alice's rights, no more.
	if r := s.callWith(t, browser, "", "POST", "/api/v1/nodes/node001/drain", map[string]any{}); r.status != http.StatusForbidden {
		t.Fatalf("alice's session drains: %d %s", r.status, r.body)
	}

	// A code works once.
	again := s.callWith(t, browserClient(t), "", "GET", "/ui/login?code="+url.QueryEscape(login.Code), nil)
	if loc := again.header.Get("Location"); again.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login?error=") || strings.Contains(loc, login.Code) {
		t.Fatalf("spent code: %d %q", again.status, loc)
	}

	// latticectl dashboard --print-url makes such a link for its caller.
	var out, errOut strings.Builder
	env := cli.OSEnv()
	env.Stdout, env.Stderr, env.Stdin = &out, &errOut, strings.NewReader("")
	env.Getenv = func(string) string { return "" }
	if code := cli.Main(context.Background(), env, []string{"--server", s.srv.APIAddr(), "--token", s.tokens["bob"], "dashboard", "--print-url"}); code != 0 {
		t.Fatalf("latticectl dashboard --print-url: exit %d: %s", code, errOut.String())
	}
	printed := strings.TrimSpace(out.String())
	if !strings.HasPrefix(printed, s.base+"/ui/login?code=") {
		t.Fatalf("latticectl dashboard --print-url printed %q", printed)
	}
	viaCLI := browserClient(t)
	if r := s.callWith(t, viaCLI, "", "GET", strings.TrimPrefix(printed, s.base), nil); r.status != http.StatusSeeOther {
		t.Fatalf("the printed link: %d", r.status)
	}
	if who := s.callWith(t, viaCLI, "", "GET", "/api/v1/whoami", nil).json(t); who["user"] != "bob" {
		t.Fatalf("the printed link logs in as %v", who)
	}

	// A pasted token.
	paste := browserClient(t)
	form := url.Values{"token": {s.tokens["bob"]}}
	resp, err := paste.PostForm(s.base+"/ui/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pasted token: %d", resp.StatusCode)
	}
	if who := s.callWith(t, paste, "", "GET", "/api/v1/whoami", nil).json(t); who["user"] != "bob" {
		t.Fatalf("pasted token session acts as %v", who)
	}
	resp, err = browserClient(t).PostForm(s.base+"/ui/login", url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/ui/login?error=") || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("bad token: %d %q", resp.StatusCode, loc)
	}
	// Another site's page cannot post the form.
	req, _ := http.NewRequest("POST", s.base+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err = browserClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site login: %d", resp.StatusCode)
	}

	// Logging out ends the session on the server, not only in the browser.
	session := ""
	for _, c := range browser.Jar.Cookies(mustURL(t, s.base)) {
		if c.Name == "lattice_session" {
			session = c.Value
		}
	}
	resp, err = browser.PostForm(s.base+"/ui/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := s.call(t, session, "GET", "/api/v1/whoami", nil); r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "session") {
		t.Fatalf("after logout: %d %s", r.status, r.body)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
