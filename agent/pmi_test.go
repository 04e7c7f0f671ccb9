package agent

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// pmiClient is a test PMI client on one end of a socket pair.
type pmiClient struct {
	t *testing.T
	f *os.File
	r *bufio.Reader
}

func (c *pmiClient) send1(line string) map[string]string {
	c.t.Helper()
	if _, err := io.WriteString(c.f, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("%s: %v", line, err)
	}
	out := map[string]string{}
	for _, tok := range strings.Fields(resp) {
		k, v, _ := strings.Cut(tok, "=")
		out[k] = v
	}
	return out
}

func (c *pmiClient) send2(cmd string) map[string]string {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.f, "%-6d%s", len(cmd), cmd); err != nil {
		c.t.Fatal(err)
	}
	var head [6]byte
	if _, err := io.ReadFull(c.r, head[:]); err != nil {
		c.t.Fatalf("%s: %v", cmd, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(head[:])))
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range strings.Split(strings.ReplaceAll(string(body), ";;", "\x00"), ";") {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = strings.ReplaceAll(v, "\x00", ";")
		}
	}
	return out
}

func newPMIClient(t *testing.T, p *pmiNode, rank int32) *pmiClient {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	go p.serve(os.NewFile(uintptr(fds[0]), "server"), rank)
	f := os.NewFile(uintptr(fds[1]), "client")
	t.Cleanup(func() { f.Close() })
	return &pmiClient{t: t, f: f, r: bufio.NewReader(f)}
}

// TestPMIFenceAcrossNodes runs a 2-rank step on two nodes of one agent:
// rank 0 speaks PMI-1 and rank 1 PMI-2; a fake leader gathers both nodes'
// fence parts and answers each node, and then each rank reads the
// other's put.
func TestPMIFenceAcrossNodes(t *testing.T) {
	a := &Agent{log: slog.New(slog.NewTextHandler(io.Discard, nil)), outbox: make(chan *latticev1.AgentMessage, 16)}
	launch := func(node string, index int32, rank int32) *latticev1.StepLaunch {
		return &latticev1.StepLaunch{AllocationId: 7, StepId: 1, Node: node, NodeIndex: index, Ntasks: 2,
			Tasks: []*latticev1.StepTask{{Rank: rank}}, StepNodes: []string{"n1", "n2"}, StepTasksPerNode: []int32{1, 1}, Mpi: "pmi2"}
	}
	p1, p2 := newPMINode(a, launch("n1", 0, 0)), newPMINode(a, launch("n2", 1, 1))
	defer p1.close()
	defer p2.close()
	a.steps.runs = map[stepKey][]*stepRun{{7, 1}: {{node: "n1", pmi: p1}, {node: "n2", pmi: p2}}}
	// The leader: when both nodes sent fence seq, every node gets all puts.
	go func() {
		parts := map[int32][]*latticev1.StepPMIFence{}
		for m := range a.outbox {
			ev := m.GetStepEvent()
			if ev == nil || ev.PmiFence == nil {
				continue
			}
			f := ev.PmiFence
			parts[f.Seq] = append(parts[f.Seq], f)
			if len(parts[f.Seq]) == 2 {
				done := &latticev1.StepPMIFenceDone{AllocationId: 7, StepId: 1, Seq: f.Seq}
				for _, p := range parts[f.Seq] {
					done.Keys, done.Values = append(done.Keys, p.Keys...), append(done.Values, p.Values...)
				}
				a.pmiFenceDone(done)
			}
		}
	}()
	c1, c2 := newPMIClient(t, p1, 0), newPMIClient(t, p2, 1)

	if r := c1.send1("cmd=init pmi_version=1 pmi_subversion=1"); r["cmd"] != "response_to_init" || r["rc"] != "0" {
		t.Fatalf("PMI-1 init: %v", r)
	}
	if r := c1.send1("cmd=get_maxes"); r["cmd"] != "maxes" || r["vallen_max"] == "" {
		t.Errorf("get_maxes: %v", r)
	}
	kvs := c1.send1("cmd=get_my_kvsname")["kvsname"]
	if r := c1.send1("cmd=get kvsname=" + kvs + " key=PMI_process_mapping"); r["value"] != "(vector,(0,2,1))" {
		t.Errorf("process mapping: %v", r)
	}
	if r := c1.send1("cmd=put kvsname=" + kvs + " key=card-0 value=tcp://a;1"); r["rc"] != "0" {
		t.Errorf("put: %v", r)
	}

	if r := c2.send1("cmd=init pmi_version=2 pmi_subversion=0"); r["cmd"] != "response_to_init" || r["pmi_version"] != "2" {
		t.Fatalf("PMI-2 init: %v", r)
	}
	if r := c2.send2("cmd=fullinit;pmirank=1;threaded=FALSE;"); r["cmd"] != "fullinit-response" || r["rank"] != "1" || r["size"] != "2" || r["rc"] != "0" {
		t.Fatalf("fullinit: %v", r)
	}
	if r := c2.send2("cmd=info-getjobattr;key=PMI_process_mapping;"); r["found"] != "TRUE" || r["value"] != "(vector,(0,2,1))" {
		t.Errorf("info-getjobattr: %v", r)
	}
	if r := c2.send2("cmd=kvs-put;key=card-1;value=b;;c;"); r["rc"] != "0" {
		t.Errorf("kvs-put: %v", r)
	}
	if r := c2.send2("cmd=kvs-get;jobid=x;srcid=-1;key=card-0;"); r["found"] != "FALSE" {
		t.Errorf("rank 0's put seen before the fence: %v", r)
	}
	// Both enter the barrier; neither may leave before the other came.
	got := make(chan map[string]string, 1)
	go func() { got <- c1.send1("cmd=barrier_in") }()
	select {
	case r := <-got:
		t.Fatalf("barrier ended with one of two ranks in it: %v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if r := c2.send2("cmd=kvs-fence;thrid=5;"); r["cmd"] != "kvs-fence-response" || r["rc"] != "0" || r["thrid"] != "5" {
		t.Errorf("kvs-fence: %v", r)
	}
	if r := <-got; r["cmd"] != "barrier_out" || r["rc"] != "0" {
		t.Errorf("barrier_out: %v", r)
	}
	if r := c2.send2("cmd=kvs-get;jobid=x;srcid=-1;key=card-0;"); r["found"] != "TRUE" || r["value"] != "tcp://a;1" {
		t.Errorf("rank 1 reads rank 0's put: %v", r)
	}
	if r := c1.send1("cmd=get kvsname=" + kvs + " key=card-1"); r["value"] != "b;c" {
		t.Errorf("rank 0 reads rank 1's put: %v", r)
	}
	if r := c1.send1("cmd=get kvsname=" + kvs + " key=nope"); r["rc"] == "0" {
		t.Errorf("get of a missing key: %v", r)
	}
	if r := c2.send2("cmd=finalize;"); r["cmd"] != "finalize-response" || r["rc"] != "0" {
		t.Errorf("finalize: %v", r)
	}
	if r := c1.send1("cmd=finalize"); r["cmd"] != "finalize_ack" {
		t.Errorf("finalize: %v", r)
	}
}

func TestProcessMapping(t *testing.T) {
	for _, tt := range []struct {
		counts []int
		want   string
	}{
		{[]int{2, 2, 2, 2}, "(vector,(0,4,2))"},
		{[]int{3, 2}, "(vector,(0,1,3),(1,1,2))"},
		{[]int{4, 4, 1}, "(vector,(0,2,4),(2,1,1))"},
	} {
		if got := ProcessMapping(tt.counts); got != tt.want {
			t.Errorf("ProcessMapping(%v) = %s, want %s", tt.counts, got, tt.want)
		}
	}
}
