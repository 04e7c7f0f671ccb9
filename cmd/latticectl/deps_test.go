package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// heavy are packages latticectl must not link: every latticectl run pays
// at start-up for the memory its code and its packages' initialisation
// touch, and users' loops run one per submission. The offline tools that
// need them run in latticectl-offline (cli/offline.go).
var heavy = []string{
	"github.com/latticehpc/lattice/replay",
	"github.com/latticehpc/lattice/solver",
	"github.com/latticehpc/lattice/vcluster",
	"github.com/latticehpc/lattice/predict",
	"github.com/latticehpc/lattice/quorum",
	"github.com/latticehpc/lattice/server",
	"github.com/latticehpc/lattice/agent",
	"gonum.org/v1/plot",
	"codeberg.org/go-latex/latex",
	"github.com/schollz/progressbar/v3",
	"github.com/hashicorp/raft",
	"go.etcd.io/bbolt",
	"github.com/prometheus/client_golang/prometheus",
	"net/http/pprof",
}

// releaseHeavy are left out too by the release build's tags (Makefile,
// deploy/Dockerfile): grpcnotrace (x/net/trace, html/template) and
// urfave_cli_no_docs (man and markdown generation).
var releaseHeavy = []string{
	"golang.org/x/net/trace",
	"html/template",
	"github.com/russross/blackfriday/v2",
	"github.com/cpuguy83/go-md2man/v2/md2man",
}

func deps(t *testing.T, pkg string, tags string) map[string]bool {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	args := []string{"list", "-deps"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command(gobin, append(args, pkg)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		set[p] = true
	}
	return set
}

func TestLatticectlLinksNoOfflineTools(t *testing.T) {
	d := deps(t, ".", "")
	for _, p := range heavy {
		if d[p] {
			t.Errorf("latticectl links %s (move what needs it into latticectl-offline)", p)
		}
	}
	// The companion does link them: the commands still exist.
	o := deps(t, "../latticectl-offline", "")
	for _, p := range []string{"github.com/latticehpc/lattice/replay", "github.com/latticehpc/lattice/quorum"} {
		if !o[p] {
			t.Errorf("latticectl-offline does not link %s", p)
		}
	}
	r := deps(t, ".", "grpcnotrace,urfave_cli_no_docs")
	for _, p := range append(heavy, releaseHeavy...) {
		if r[p] {
			t.Errorf("latticectl built as released links %s", p)
		}
	}
}

// TestStartupFirst: package startup (one processor for the short-lived
// process) imports nothing that initialises late, and Go initialises it
// before gRPC and protobuf, whose initialisation it is meant to cover.
// The test binary links what latticectl links, so its own initialisation
// order (GODEBUG=inittrace=1) is latticectl's.
func TestStartupFirst(t *testing.T) {
	const startup = "github.com/latticehpc/lattice/cmd/latticectl/startup"
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", "./startup").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	if imp := strings.Fields(string(out)); strings.Join(imp, " ") != "runtime syscall" {
		t.Errorf("package startup imports %v, want only runtime and syscall (anything more delays its init)", imp)
	}
	if !deps(t, ".", "")[startup] {
		t.Fatalf("latticectl does not link %s", startup)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	trace, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, trace)
	}
	order := map[string]int{}
	for i, line := range strings.Split(string(trace), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			if _, seen := order[f[1]]; !seen {
				order[f[1]] = i
			}
		}
	}
	s, ok := order[startup]
	if !ok {
		t.Fatalf("no init of %s in the trace:\n%s", startup, trace)
	}
	for _, heavy := range []string{"google.golang.org/grpc", "google.golang.org/protobuf/internal/impl", "github.com/latticehpc/lattice/api/lattice/v1"} {
		if h, ok := order[heavy]; ok && h < s {
			t.Errorf("%s is initialised before package startup", heavy)
		}
	}
}

// TestMakefileBuildsStatic: `make` builds latticectl without cgo (a
// dynamically linked latticectl pays the loader's and libc's start-up on
// every call).
func TestMakefileBuildsStatic(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0 go build -tags $(TAGS) -o bin/ ./cmd/latticectl") {
		t.Error("the Makefile's build target no longer builds latticectl with CGO_ENABLED=0 and the release tags")
	}
}
