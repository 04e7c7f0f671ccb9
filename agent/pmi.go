package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// The PMI server of a step (srun --mpi=pmi2): MPI libraries started
// directly by srun (MPICH, Intel MPI, MVAPICH...) find their rank, the
// job's size and each other's addresses through it. Every task gets one
// end of a socket pair as PMI_FD and speaks the simple PMI wire
// protocol: PMI-1 (newline-terminated "cmd=NAME key=value ..." lines) or
// PMI-2 (after a PMI-1 "cmd=init pmi_version=2" line, messages of a
// 6-digit length and "cmd=NAME;key=value;..."). Puts stay on the node
// until a barrier (PMI-1 barrier_in, PMI-2 kvs-fence): when every task of
// the node has entered it, the node's puts go to the leader
// (StepPMIFence), which answers every node of the step with all of them
// (StepPMIFenceDone); then the barrier ends and gets see every rank's
// puts. Spawn, publish/lookup and job-connect are not served (an error
// answer).

// pmiNode is the PMI server of one step on one node.
type pmiNode struct {
	a       *Agent
	alloc   uint64
	step    int32
	node    string
	size    int
	local   int    // tasks on this node
	kvsName string // PMI-1 kvs name, PMI-2 job id
	mapping string // PMI_process_mapping

	mu      sync.Mutex
	kvs     map[string]string
	keys    []string // this node's puts since the last fence
	values  []string
	entered int
	seq     int32
	done    chan struct{} // closed when the current fence ends everywhere
	attrs   map[string]string
	attrSet chan struct{} // closed (and renewed) when a node attribute is put
	stopped chan struct{}
	stop    sync.Once
}

func newPMINode(a *Agent, m *latticev1.StepLaunch) *pmiNode {
	counts := make([]int, len(m.StepTasksPerNode))
	for i, c := range m.StepTasksPerNode {
		counts[i] = int(c)
	}
	p := &pmiNode{a: a, alloc: m.AllocationId, step: m.StepId, node: m.Node, size: int(m.Ntasks), local: len(m.Tasks),
		kvsName: fmt.Sprintf("lattice_%d_%d", m.AllocationId, m.StepId), mapping: ProcessMapping(counts),
		kvs: map[string]string{}, done: make(chan struct{}), attrs: map[string]string{}, attrSet: make(chan struct{}),
		stopped: make(chan struct{})}
	p.kvs["PMI_process_mapping"] = p.mapping
	return p
}

// ProcessMapping is MPICH's PMI_process_mapping of a block layout:
// "(vector,(FIRST_NODE,NODES,TASKS_PER_NODE),...)", runs of nodes with the
// same task count in one triple.
func ProcessMapping(counts []int) string {
	var b strings.Builder
	b.WriteString("(vector")
	for i := 0; i < len(counts); {
		j := i
		for j < len(counts) && counts[j] == counts[i] {
			j++
		}
		fmt.Fprintf(&b, ",(%d,%d,%d)", i, j-i, counts[i])
		i = j
	}
	b.WriteString(")")
	return b.String()
}

// close ends the server: tasks still waiting get an error answer.
func (p *pmiNode) close() { p.stop.Do(func() { close(p.stopped) }) }

// taskEnd is the task's end of a new socket pair, and PMI's variables.
func (p *pmiNode) taskEnd(rank int32) (*os.File, *os.File, []string, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("PMI socket pair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-task")
	r := strconv.Itoa(int(rank))
	// The task's end is its fd 3 (the first of ExtraFiles).
	env := []string{"PMI_FD=3", "PMI_RANK=" + r, "PMI_SIZE=" + strconv.Itoa(p.size), "PMI_JOBID=" + p.kvsName,
		"PMI_SPAWNED=0", "PMI_APPNUM=0"}
	return ours, theirs, env, nil
}

// serve answers one task's PMI requests until it closes its end.
func (p *pmiNode) serve(conn *os.File, rank int32) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	version := 1
	for {
		var req pmiMsg
		var err error
		if version == 2 {
			req, err = readPMI2(r)
		} else {
			req, err = readPMI1(r)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				p.a.log.Debug("PMI connection", "alloc", p.alloc, "step", p.step, "rank", rank, "err", err)
			}
			return
		}
		var resp pmiMsg
		if version == 1 {
			if req.cmd == "init" && req.get("pmi_version") == "2" {
				version = 2
				if _, err := io.WriteString(conn, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n"); err != nil {
					return
				}
				continue
			}
			resp = p.handle1(req, rank)
		} else {
			resp = p.handle2(req, rank)
		}
		if resp.cmd == "" {
			continue // abort: no answer
		}
		if version == 2 {
			_, err = io.WriteString(conn, resp.wire2())
		} else {
			_, err = io.WriteString(conn, resp.wire1())
		}
		if err != nil {
			return
		}
	}
}

// handle1 answers a PMI-1 request.
func (p *pmiNode) handle1(q pmiMsg, rank int32) pmiMsg {
	ok := func(cmd string, kv ...string) pmiMsg { return newMsg(cmd, append(kv, "rc", "0")...) }
	switch q.cmd {
	case "init":
		return newMsg("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0")
	case "get_maxes":
		return ok("maxes", "kvsname_max", "256", "keylen_max", "256", "vallen_max", "1024")
	case "get_appnum":
		return ok("appnum", "appnum", "0")
	case "get_universe_size":
		return ok("universe_size", "size", strconv.Itoa(p.size))
	case "get_my_kvsname":
		return ok("my_kvsname", "kvsname", p.kvsName)
	case "initack":
		return ok("initack")
	case "put":
		p.put(q.get("key"), q.get("value"))
		return newMsg("put_result", "rc", "0", "msg", "success")
	case "get":
		if v, found := p.get(q.get("key")); found {
			return newMsg("get_result", "rc", "0", "msg", "success", "value", v)
		}
		return newMsg("get_result", "rc", "-1", "msg", "key_"+q.get("key")+"_not_found")
	case "barrier_in":
		if err := p.fence(); err != nil {
			return newMsg("barrier_out", "rc", "-1", "msg", err.Error())
		}
		return ok("barrier_out")
	case "finalize":
		return ok("finalize_ack")
	case "abort":
		p.abort(rank, q.get("exitcode"), q.get("msg"))
		return pmiMsg{}
	}
	return newMsg(q.cmd+"_result", "rc", "-1", "msg", "unsupported_by_lattice")
}

// handle2 answers a PMI-2 request.
func (p *pmiNode) handle2(q pmiMsg, rank int32) pmiMsg {
	resp := func(cmd string, kv ...string) pmiMsg {
		m := newMsg(cmd + "-response")
		if t := q.get("thrid"); t != "" {
			m.add("thrid", t)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m.add(kv[i], kv[i+1])
		}
		return m
	}
	switch q.cmd {
	case "fullinit":
		return resp("fullinit", "rc", "0", "pmi-version", "2", "pmi-subversion", "0", "rank", strconv.Itoa(int(rank)),
			"size", strconv.Itoa(p.size), "appnum", "0", "debugged", "FALSE", "pmiverbose", "FALSE")
	case "job-getid":
		return resp("job-getid", "rc", "0", "jobid", p.kvsName)
	case "info-getjobattr":
		switch q.get("key") {
		case "PMI_process_mapping":
			return resp("info-getjobattr", "rc", "0", "found", "TRUE", "value", p.mapping)
		case "universeSize":
			return resp("info-getjobattr", "rc", "0", "found", "TRUE", "value", strconv.Itoa(p.size))
		}
		return resp("info-getjobattr", "rc", "0", "found", "FALSE")
	case "info-putnodeattr":
		p.putAttr(q.get("key"), q.get("value"))
		return resp("info-putnodeattr", "rc", "0")
	case "info-getnodeattr":
		if v, found := p.getAttr(q.get("key"), strings.EqualFold(q.get("wait"), "TRUE")); found {
			return resp("info-getnodeattr", "rc", "0", "found", "TRUE", "value", v)
		}
		return resp("info-getnodeattr", "rc", "0", "found", "FALSE")
	case "kvs-put":
		p.put(q.get("key"), q.get("value"))
		return resp("kvs-put", "rc", "0")
	case "kvs-fence":
		if err := p.fence(); err != nil {
			return resp("kvs-fence", "rc", "1", "errmsg", err.Error())
		}
		return resp("kvs-fence", "rc", "0")
	case "kvs-get":
		if v, found := p.get(q.get("key")); found {
			return resp("kvs-get", "rc", "0", "found", "TRUE", "value", v)
		}
		return resp("kvs-get", "rc", "0", "found", "FALSE")
	case "finalize":
		return resp("finalize", "rc", "0")
	case "abort":
		p.abort(rank, "", q.get("msg"))
		return pmiMsg{}
	}
	return resp(q.cmd, "rc", "1", "errmsg", "not supported by Lattice's PMI server")
}

func (p *pmiNode) put(k, v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kvs[k] = v
	p.keys, p.values = append(p.keys, k), append(p.values, v)
}

func (p *pmiNode) get(k string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.kvs[k]
	return v, ok
}

func (p *pmiNode) putAttr(k, v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attrs[k] = v
	close(p.attrSet)
	p.attrSet = make(chan struct{})
}

func (p *pmiNode) getAttr(k string, wait bool) (string, bool) {
	for {
		p.mu.Lock()
		v, ok := p.attrs[k]
		ch := p.attrSet
		p.mu.Unlock()
		if ok || !wait {
			return v, ok
		}
		select {
		case <-ch:
		case <-p.stopped:
			return "", false
		}
	}
}

// fence waits until every task of the step entered this barrier; the
// last task of the node sends the node's puts to the leader.
func (p *pmiNode) fence() error {
	p.mu.Lock()
	p.entered++
	done := p.done
	var part *latticev1.StepPMIFence
	if p.entered == p.local {
		p.seq++
		part = &latticev1.StepPMIFence{Node: p.node, Seq: p.seq, Keys: p.keys, Values: p.values}
		p.keys, p.values, p.entered = nil, nil, 0
	}
	p.mu.Unlock()
	if part != nil {
		p.a.sendStepEvent(&latticev1.StepEvent{AllocationId: p.alloc, StepId: p.step, Rank: -1, PmiFence: part})
	}
	select {
	case <-done:
		return nil
	case <-p.stopped:
		return errors.New("the step ended")
	}
}

// fenceDone ends fence seq with every node's puts.
func (p *pmiNode) fenceDone(seq int32, keys, values []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq != p.seq {
		return // a resend, or not this node's current fence
	}
	for i := range keys {
		if i < len(values) {
			p.kvs[keys[i]] = values[i]
		}
	}
	close(p.done)
	p.done = make(chan struct{})
}

// abort is PMI_Abort: the message on the task's stderr, and the task
// killed (which fails the step and stops the others).
func (p *pmiNode) abort(rank int32, code, msg string) {
	text := fmt.Sprintf("lattice: task %d called PMI abort", rank)
	if code != "" {
		text += " (exit code " + code + ")"
	}
	if msg != "" {
		text += ": " + msg
	}
	p.a.sendStepEvent(&latticev1.StepEvent{AllocationId: p.alloc, StepId: p.step, Rank: rank, Stderr: true, Data: []byte(text + "\n")})
	p.a.steps.mu.Lock()
	var pgid int
	for _, r := range p.a.steps.runs[stepKey{p.alloc, p.step}] {
		for _, t := range r.tasks {
			if t.rank == rank {
				pgid = t.pgid
			}
		}
	}
	p.a.steps.mu.Unlock()
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// pmiFenceDone hands a finished fence to this agent's nodes of the step.
func (a *Agent) pmiFenceDone(m *latticev1.StepPMIFenceDone) {
	a.steps.mu.Lock()
	var servers []*pmiNode
	for _, r := range a.steps.runs[stepKey{m.AllocationId, m.StepId}] {
		if r.pmi != nil {
			servers = append(servers, r.pmi)
		}
	}
	a.steps.mu.Unlock()
	for _, s := range servers {
		s.fenceDone(m.Seq, m.Keys, m.Values)
	}
}

// pmiMsg is one PMI request or answer: its command and key-value pairs in
// order.
type pmiMsg struct {
	cmd string
	kv  [][2]string
}

func newMsg(cmd string, kv ...string) pmiMsg {
	m := pmiMsg{cmd: cmd}
	for i := 0; i+1 < len(kv); i += 2 {
		m.add(kv[i], kv[i+1])
	}
	return m
}

func (m *pmiMsg) add(k, v string) { m.kv = append(m.kv, [2]string{k, v}) }

func (m pmiMsg) get(k string) string {
	for _, kv := range m.kv {
		if kv[0] == k {
			return kv[1]
		}
	}
	return ""
}

// maxPMIMessage bounds one request.
const maxPMIMessage = 1 << 20

// readPMI1 reads a PMI-1 line: "cmd=NAME k=v k=v\n" (or "mcmd=..."; the
// value of a key runs to the next space).
func readPMI1(r *bufio.Reader) (pmiMsg, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if line != "" && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return pmiMsg{}, err
	}
	if len(line) > maxPMIMessage {
		return pmiMsg{}, errors.New("PMI line too long")
	}
	var m pmiMsg
	for _, tok := range strings.Fields(line) {
		k, v, _ := strings.Cut(tok, "=")
		if k == "cmd" || k == "mcmd" {
			m.cmd = v
			continue
		}
		m.add(k, v)
	}
	if m.cmd == "" {
		return pmiMsg{}, fmt.Errorf("PMI-1 line without cmd: %q", strings.TrimSpace(line))
	}
	return m, nil
}

// readPMI2 reads a PMI-2 message: 6 ASCII digits (blank padded) giving
// the length, then "cmd=NAME;k=v;...;" where ";;" is a ';' in a value.
func readPMI2(r *bufio.Reader) (pmiMsg, error) {
	var head [6]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return pmiMsg{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(head[:])))
	if err != nil || n < 0 || n > maxPMIMessage {
		return pmiMsg{}, fmt.Errorf("bad PMI-2 length %q", head[:])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return pmiMsg{}, err
	}
	var m pmiMsg
	s := string(body)
	for len(s) > 0 {
		// a field ends at a ';' that is not doubled
		var field strings.Builder
		i := 0
		for ; i < len(s); i++ {
			if s[i] == ';' {
				if i+1 < len(s) && s[i+1] == ';' {
					field.WriteByte(';')
					i++
					continue
				}
				break
			}
			field.WriteByte(s[i])
		}
		if i < len(s) {
			i++
		}
		s = s[i:]
		k, v, _ := strings.Cut(field.String(), "=")
		if k == "" {
			continue
		}
		if k == "cmd" && m.cmd == "" {
			m.cmd = v
			continue
		}
		m.add(k, v)
	}
	if m.cmd == "" {
		return pmiMsg{}, fmt.Errorf("PMI-2 message without cmd: %q", body)
	}
	return m, nil
}

func (m pmiMsg) wire1() string {
	var b strings.Builder
	b.WriteString("cmd=" + m.cmd)
	for _, kv := range m.kv {
		b.WriteString(" " + kv[0] + "=" + kv[1])
	}
	b.WriteByte('\n')
	return b.String()
}

func (m pmiMsg) wire2() string {
	var b strings.Builder
	b.WriteString("cmd=" + m.cmd + ";")
	for _, kv := range m.kv {
		b.WriteString(kv[0] + "=" + strings.ReplaceAll(kv[1], ";", ";;") + ";")
	}
	return fmt.Sprintf("%-6d%s", b.Len(), b.String())
}
