package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

var scontrolOpts = []sopt{
	{"all", 'a', noArg, ""}, {"details", 'd', noArg, ""}, {"federation", 0, noArg, ""}, {"future", 'F', noArg, ""},
	{"help", 'h', noArg, ""}, {"hide", 0, noArg, ""}, {"local", 0, noArg, ""}, {"clusters", 'M', needArg, ""},
	{"oneliner", 'o', noArg, ""}, {"quiet", 'Q', noArg, ""}, {"sibling", 0, noArg, ""}, {"usage", 0, noArg, "help"},
	{"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""}, {"json", 0, optArg, "!"}, {"yaml", 0, optArg, "!"},
}

// kvRecord is one record of scontrol show: lines of Key=Value pairs.
type kvRecord [][]string

func (s *slurmRun) writeRecord(rec kvRecord, oneliner bool) {
	var b strings.Builder
	for i, line := range rec {
		switch {
		case oneliner && i > 0:
			b.WriteByte(' ')
		case i > 0:
			b.WriteString("\n   ")
		}
		b.WriteString(strings.Join(line, " "))
	}
	b.WriteString("\n")
	if !oneliner {
		b.WriteString("\n")
	}
	fmt.Fprint(s.Stdout, b.String())
}

func skv(k, v string) string { return k + "=" + v }

func nullOr(s string) string { return cmp.Or(s, "(null)") }

func (s *slurmRun) scontrol(args []string) error {
	a, err := s.parse(scontrolOpts, args, false, "scontrol [<OPTION>] [<COMMAND>]\n  commands: show job|node|partition|reservation [ID], hold, uhold, release, requeue, requeuehold,\n            update JobId=ID|NodeName=LIST|ReservationName=R Key=Value..., create|delete reservation, suspend, resume, version\n")
	if a == nil {
		return err
	}
	if len(a.pos) == 0 {
		return fmt.Errorf("interactive mode is not supported by Lattice's scontrol; give a command (show, hold, release, requeue, update)")
	}
	one := a.has("oneliner")
	cmd, rest := strings.ToLower(a.pos[0]), a.pos[1:]
	switch cmd {
	case "show":
		if len(rest) == 0 {
			return fmt.Errorf("too few arguments for keyword:show")
		}
		ent := strings.ToLower(rest[0])
		var id string
		if len(rest) > 1 {
			id = rest[1]
		}
		if e, v, ok := strings.Cut(rest[0], "="); ok { // show JobId=12
			ent, id = strings.ToLower(e), v
		}
		switch {
		case ent == "job" || ent == "jobs" || ent == "jobid":
			return s.showJobs(id, one, a.has("details"))
		case ent == "node" || ent == "nodes" || ent == "nodename":
			return s.showNodes(id, one)
		case ent == "partition" || ent == "partitions" || ent == "partitionname":
			return s.showPartitions(id, one)
		case ent == "reservation" || ent == "reservations" || ent == "res" || ent == "reservationname":
			return s.showReservations(id, one) // reservation.go
		case ent == "config":
			fmt.Fprintf(s.Stdout, "Configuration data as of %s\nClusterName             = lattice\nSLURM_VERSION           = 22.05.8\n", s.Now().In(s.Location).Format("2006-01-02T15:04:05"))
			return nil
		}
		return fmt.Errorf("invalid entity:%s for keyword:show", rest[0])
	case "hold", "uhold", "release", "requeue", "requeuehold":
		ids, err := scontrolIDs(rest)
		if err != nil {
			return err
		}
		return s.jobControl(cmd, ids)
	case "create", "delete":
		if len(rest) == 0 {
			return fmt.Errorf("too few arguments for keyword:%s", cmd)
		}
		ent, _, named := strings.Cut(rest[0], "=")
		switch strings.ToLower(ent) {
		case "reservation", "res", "reservationname":
			if named { // delete ReservationName=X
				return s.scontrolReservation(cmd, rest[0], rest, one)
			}
			return s.scontrolReservation(cmd, rest[0], rest[1:], one)
		}
		return fmt.Errorf("invalid entity:%s for keyword:%s (Lattice's scontrol %s only reservations)", rest[0], cmd, cmd)
	case "update":
		for _, a := range rest {
			switch k, _, _ := strings.Cut(a, "="); strings.ToLower(k) {
			case "reservationname", "reservation":
				return s.scontrolReservation("update", "", rest, one)
			case "nodename", "node":
				return s.scontrolUpdateNodes(rest) // hostlists.go
			}
		}
		return s.scontrolUpdate(rest)
	case "version":
		fmt.Fprintf(s.Stdout, "slurm 22.05.8 (lattice %s)\n", Version)
		return nil
	case "ping":
		cn, err := s.connect(s.c)
		if err != nil {
			return err
		}
		if _, err := s.listVClusters(cn); err != nil {
			fmt.Fprintln(s.Stdout, "Slurmctld(primary) at lattice is DOWN")
			return errReported
		}
		fmt.Fprintln(s.Stdout, "Slurmctld(primary) at lattice is UP")
		return nil
	}
	return &slurmPlain{"invalid keyword: " + a.pos[0]}
}

// scontrolIDs reads job ids as scontrol takes them: 12 13, 12,13,
// JobId=12, 12_[1-3].
func scontrolIDs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && strings.EqualFold(k, "jobid") {
			a = v
		}
		for _, id := range strings.Split(a, ",") {
			if id == "" {
				continue
			}
			exp, err := expandIDs([]string{id})
			if err != nil {
				return nil, fmt.Errorf("Invalid job id specified")
			}
			out = append(out, exp...)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("too few arguments for keyword")
	}
	return out, nil
}

func (s *slurmRun) jobControl(cmd string, ids []string) error {
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	req := &latticev1.JobControlRequest{Ids: ids, ClientRequestId: s.reqID(), UserHold: cmd == "uhold", Hold: cmd == "requeuehold"}
	var resp *latticev1.JobControlResponse
	err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		c := latticev1.NewAllocationServiceClient(cc)
		var err error
		switch cmd {
		case "hold", "uhold":
			resp, err = c.Hold(ctx, req)
		case "release":
			resp, err = c.Release(ctx, req)
		default:
			resp, err = c.Requeue(ctx, req)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%s", slurmJobError(err.Error()))
	}
	failed := false
	for _, res := range resp.GetResults() {
		if !res.GetOk() {
			failed = true
			fmt.Fprintf(s.Stderr, "%s for job %s\n", slurmJobError(res.GetError()), res.GetId())
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// scontrolUpdate is scontrol update JobId=ID Key=Value...: the keys
// latticectl update knows, run through it.
func (s *slurmRun) scontrolUpdate(args []string) error {
	var ids []string
	var flags []string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("Invalid input: %s", a)
		}
		switch strings.ToLower(k) {
		case "jobid", "job":
			exp, err := scontrolIDs([]string{v})
			if err != nil {
				return err
			}
			ids = append(ids, exp...)
		case "timelimit":
			flags = append(flags, "--time", v)
		case "partition":
			flags = append(flags, "--vcluster", v)
		case "qos":
			flags = append(flags, "--qos", v)
		case "jobname", "name":
			flags = append(flags, "--name", v)
		case "numnodes":
			flags = append(flags, "--nodes", v)
		case "starttime":
			flags = append(flags, "--begin", v)
		case "priority":
			flags = append(flags, "--priority-class", v)
		default:
			return fmt.Errorf("Update of %s is not supported by Lattice (TimeLimit, Partition, QOS, JobName, NumNodes, StartTime, Priority)", k)
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("No job id specified (JobId=ID)")
	}
	if len(flags) == 0 {
		return fmt.Errorf("No changes specified")
	}
	failed := false
	for _, id := range ids {
		var quiet strings.Builder
		env := s.Env
		env.Stderr, env.Stdout = &quiet, io.Discard
		if code := Main(s.c.Context, env, append([]string{"update", id}, flags...)); code != 0 {
			failed = true
			msg := strings.TrimPrefix(strings.TrimSpace(quiet.String()), "latticectl: ")
			fmt.Fprintf(s.Stderr, "%s for job %s\n", slurmJobError(msg), id)
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// ---- show job ----

func (s *slurmRun) showJobs(id string, one, _ bool) error {
	req := &latticev1.ListAllocationsRequest{TerminalWindowSeconds: 300}
	var want []string
	if id != "" {
		exp, err := expandIDs([]string{id})
		if err != nil {
			return fmt.Errorf("Invalid job id specified")
		}
		want = exp
		req.TerminalWindowSeconds = 7 * 24 * 3600
	}
	all, err := s.listAllocations(s.c, req)
	if err != nil {
		return err
	}
	var jobs []*latticev1.Allocation
	for _, al := range all {
		if len(want) == 0 || slices.Contains(want, displayID(al)) || slices.Contains(want, strconv.FormatUint(al.GetArrayJobId(), 10)) {
			jobs = append(jobs, al)
		}
	}
	if len(jobs) == 0 {
		if id != "" {
			return &slurmPlain{"slurm_load_jobs error: Invalid job id specified"}
		}
		fmt.Fprintln(s.Stdout, "No jobs in the system")
		return nil
	}
	slices.SortFunc(jobs, func(x, y *latticev1.Allocation) int { return cmp.Compare(x.GetId(), y.GetId()) })
	for _, al := range jobs {
		if id != "" && len(want) == 1 && !strings.Contains(id, "_") && al.GetArrayJobId() == 0 && displayID(al) != id {
			continue
		}
		if id != "" && len(want) == 1 && strings.Contains(id, "_") && displayID(al) != id {
			continue
		}
		s.writeRecord(s.jobRecord(al), one)
	}
	return nil
}

func (s *slurmRun) jobRecord(a *latticev1.Allocation) kvRecord {
	r := a.GetRequest()
	user := slurmUser(a)
	none := func(ms int64) string { return s.slurmDate(ms, "Unknown") }
	state := slurmState(a)
	start, end := a.GetStartTimeUnixMs(), a.GetEndTimeUnixMs()
	if start != 0 && end == 0 && model.AllocState(a.GetState()).Active() {
		end = start + r.GetWalltimeSeconds()*1000
	}
	if state == "PENDING" {
		start, end = a.GetExplanation().GetExpectedStartUnixMs(), 0
	}
	nodes := runningNodes(a)
	batchHost := ""
	if nodes != "" {
		batchHost = a.GetNodes()[0]
	}
	rec := kvRecord{
		{skv("JobId", strconv.FormatUint(a.GetId(), 10)), skv("JobName", r.GetName())},
	}
	if aj := a.GetArrayJobId(); aj != 0 {
		rec[0] = []string{skv("JobId", strconv.FormatUint(a.GetId(), 10)), skv("ArrayJobId", strconv.FormatUint(aj, 10)),
			skv("ArrayTaskId", strconv.Itoa(int(a.GetArrayIndex()))), skv("JobName", r.GetName())}
	}
	limit := "UNLIMITED"
	if w := r.GetWalltimeSeconds(); w > 0 {
		limit = slurmClock(w)
	}
	batch := len(r.GetCommand()) == 0 // a script (List leaves scripts out)
	cmd := jobCommand(a)
	held := state == "PENDING" && (a.GetReason() == model.ReasonJobHeldUser || a.GetReason() == model.ReasonJobHeldAdmin)
	eligible := cmp.Or(a.GetEligibleTimeUnixMs(), a.GetSubmitTimeUnixMs())
	if held {
		eligible = 0
	}
	rec = append(rec,
		[]string{skv("UserId", user+"(0)"), skv("GroupId", user+"(0)"), skv("MCS_label", "N/A")},
		[]string{skv("Priority", strconv.Itoa(slurmPriority(a))), skv("Nice", "0"), skv("Account", nullOr(r.GetTenant())), skv("QOS", nullOr(r.GetQos()))},
		[]string{skv("JobState", state), skv("Reason", slurmReason(a)), skv("Dependency", nullOr(dependencyText(a)))},
		[]string{skv("Requeue", boolDigit(r.GetRequeue())), skv("Restarts", strconv.Itoa(int(a.GetRequeueCount()))), skv("BatchFlag", boolDigit(batch)), skv("Reboot", "0"), skv("ExitCode", slurmExit(a))},
		[]string{skv("RunTime", slurmClock(int64(s.runDuration(a)/time.Second))), skv("TimeLimit", limit), skv("TimeMin", "N/A")},
		[]string{skv("SubmitTime", none(a.GetSubmitTimeUnixMs())), skv("EligibleTime", none(eligible))},
		[]string{skv("AccrueTime", none(eligible))},
		[]string{skv("StartTime", none(start)), skv("EndTime", none(end)), skv("Deadline", "N/A")},
		[]string{skv("SuspendTime", "None"), skv("SecsPreSuspend", "0"), skv("LastSchedEval", none(cmp.Or(a.GetExplanation().GetComputedUnixMs(), a.GetSubmitTimeUnixMs()))), skv("Scheduler", "Main")},
		[]string{skv("Partition", r.GetVcluster()), skv("AllocNode:Sid", "localhost:0")},
		[]string{skv("ReqNodeList", nullOr(hostlist(r.GetNodeList()))), skv("ExcNodeList", nullOr(hostlist(r.GetExcludeNodes())))},
		[]string{skv("NodeList", nodes)},
	)
	if batchHost != "" {
		rec = append(rec, []string{skv("BatchHost", batchHost)})
	}
	n := nodeCount(a)
	nodesText := strconv.Itoa(n)
	if state == "PENDING" { // the range asked for: 2-2
		nodesText = fmt.Sprintf("%d-%d", r.GetNodesMin(), max(r.GetNodesMax(), r.GetNodesMin()))
	}
	rec = append(rec,
		[]string{skv("NumNodes", nodesText), skv("NumCPUs", strconv.Itoa(jobCPUs(a))), skv("NumTasks", strconv.Itoa(n)), skv("CPUs/Task", "1"), skv("ReqB:S:C:T", "0:0:*:*")},
		[]string{skv("TRES", fmt.Sprintf("cpu=%d,node=%d,billing=%d", jobCPUs(a), n, jobCPUs(a)))},
		[]string{skv("Socks/Node", "*"), skv("NtasksPerN:B:S:C", "0:0:*:*"), skv("CoreSpec", "*")},
		[]string{skv("MinCPUsNode", "1"), skv("MinMemoryNode", "0"), skv("MinTmpDiskNode", "0")},
		[]string{skv("Features", nullOr(strings.Join(r.GetConstraints(), "&"))), skv("DelayBoot", "00:00:00")},
		[]string{skv("OverSubscribe", "OK"), skv("Contiguous", "0"), skv("Licenses", "(null)"), skv("Network", "(null)")},
		[]string{skv("Command", cmd)},
		[]string{skv("WorkDir", r.GetWorkDir())},
	)
	if batch {
		out := expandStdPath(a, cmp.Or(r.GetStdout(), "slurm-%j.out"))
		errp := out
		if r.GetStderr() != "" {
			errp = expandStdPath(a, r.GetStderr())
		}
		rec = append(rec, []string{skv("StdErr", errp)}, []string{skv("StdIn", "/dev/null")}, []string{skv("StdOut", out)})
	}
	// Slurm ends a job's record with an empty line of its own.
	rec = append(rec, []string{skv("Power", "")}, []string{""})
	return rec
}

// expandStdPath is scontrol's StdOut: the path with %j, %A, %a, %x, %u
// filled in, relative to the work directory.
func expandStdPath(a *latticev1.Allocation, p string) string {
	r := a.GetRequest()
	aj := a.GetArrayJobId()
	if aj == 0 {
		aj = a.GetId()
	}
	p = strings.NewReplacer("%j", strconv.FormatUint(a.GetId(), 10), "%A", strconv.FormatUint(aj, 10),
		"%a", strconv.Itoa(int(a.GetArrayIndex())), "%x", r.GetName(), "%u", slurmUser(a), "%%", "%").Replace(p)
	if !strings.HasPrefix(p, "/") && r.GetWorkDir() != "" {
		p = strings.TrimSuffix(r.GetWorkDir(), "/") + "/" + p
	}
	return p
}

// ---- show node / partition ----

func (s *slurmRun) listVClusters(cn *conn) (*latticev1.ListVClustersResponse, error) {
	var vcs *latticev1.ListVClustersResponse
	err := cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		vcs, err = latticev1.NewAdminServiceClient(cc).ListVClusters(ctx, &latticev1.ListVClustersRequest{})
		return err
	})
	return vcs, err
}

func (s *slurmRun) listAllNodes(cn *conn) ([]*latticev1.Node, error) {
	var nodes []*latticev1.Node
	err := cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		resp, err := latticev1.NewNodeServiceClient(cc).List(ctx, &latticev1.ListNodesRequest{})
		nodes = resp.GetNodes()
		return err
	})
	return nodes, err
}

func (s *slurmRun) showNodes(name string, one bool) error {
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	nodes, err := s.listAllNodes(cn)
	if err != nil {
		return err
	}
	var want []string
	if name != "" {
		if want, err = model.ExpandHostlist(name); err != nil {
			return fmt.Errorf("Invalid node name specified")
		}
	}
	shown := 0
	for _, n := range nodes {
		if len(want) > 0 && !slices.Contains(want, n.GetName()) {
			continue
		}
		shown++
		cpus := max(n.GetCpus(), 1)
		alloc := 0
		if n.GetAllocation() != 0 {
			alloc = int(cpus)
		}
		state := scontrolNodeState(n)
		gres := "(null)"
		if n.GetGpus() > 0 {
			gres = "gpu:" + cmp.Or(n.GetGpuType()+":", "") + strconv.Itoa(int(n.GetGpus()))
		}
		feat := nullOr(strings.Join(n.GetFeatures(), ","))
		rec := kvRecord{
			{skv("NodeName", n.GetName()), skv("Arch", "x86_64"), skv("CoresPerSocket", strconv.Itoa(int(cpus))), ""},
			{skv("CPUAlloc", strconv.Itoa(alloc)), skv("CPUEfctv", strconv.Itoa(int(cpus))), skv("CPUTot", strconv.Itoa(int(cpus))), skv("CPULoad", "0.00")},
			{skv("AvailableFeatures", feat)},
			{skv("ActiveFeatures", feat)},
			{skv("Gres", gres)},
			{skv("NodeAddr", n.GetName()), skv("NodeHostName", n.GetName()), skv("Version", "22.05.8")},
			{skv("OS", "Linux"), ""},
			{skv("RealMemory", strconv.FormatInt(max(n.GetMemoryMb(), 1), 10)), skv("AllocMem", "0"), skv("FreeMem", "N/A"), skv("Sockets", "1"), skv("Boards", "1")},
			{skv("State", state), skv("ThreadsPerCore", "1"), skv("TmpDisk", "0"), skv("Weight", "1"), skv("Owner", "N/A"), skv("MCS_label", "N/A")},
			{skv("Partitions", cmp.Or(n.GetCurrentVcluster(), n.GetHomeVcluster())), ""},
			{skv("BootTime", "None"), skv("SlurmdStartTime", s.slurmDate(n.GetLastHeartbeatUnixMs(), "None"))},
			{skv("LastBusyTime", s.slurmDate(n.GetLastHeartbeatUnixMs(), "None"))},
			{skv("CfgTRES", fmt.Sprintf("cpu=%d,mem=%dM,billing=%d", cpus, max(n.GetMemoryMb(), 1), cpus))},
			{skv("AllocTRES", "")},
			{skv("CapWatts", "n/a")},
			{skv("CurrentWatts", strconv.Itoa(int(n.GetMeasuredWatts()))), skv("AveWatts", "0")},
			{skv("ExtSensorsJoules", "n/s"), skv("ExtSensorsWatts", "0"), skv("ExtSensorsTemp", "n/s")},
		}
		if r := n.GetStateReason(); r != "" {
			rec = append(rec, []string{skv("Reason", r+nodeReasonStamp(s, n))})
		}
		s.writeRecord(rec, one)
	}
	if shown == 0 && name != "" {
		return &slurmPlain{fmt.Sprintf("Node %s not found", name)}
	}
	return nil
}

func (s *slurmRun) showPartitions(name string, one bool) error {
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	vcs, err := s.listVClusters(cn)
	if err != nil {
		return err
	}
	nodes, err := s.listAllNodes(cn)
	if err != nil {
		return err
	}
	shown := 0
	for _, vc := range vcs.GetVclusters() {
		if name != "" && vc.GetName() != name {
			continue
		}
		shown++
		var names []string
		cpus := 0
		for _, n := range nodes {
			if cmp.Or(n.GetCurrentVcluster(), n.GetHomeVcluster()) == vc.GetName() {
				names = append(names, n.GetName())
				cpus += int(max(n.GetCpus(), 1))
			}
		}
		def := "NO"
		if vc.GetName() == vcs.GetDefaultVcluster() {
			def = "YES"
		}
		preempt := strings.ToUpper(preemptModeOf(vc))
		rec := kvRecord{
			{skv("PartitionName", vc.GetName())},
			{skv("AllowGroups", "ALL"), skv("AllowAccounts", "ALL"), skv("AllowQos", "ALL")},
			{skv("AllocNodes", "ALL"), skv("Default", def), skv("QoS", "N/A")},
			{skv("DefaultTime", "NONE"), skv("DisableRootJobs", "NO"), skv("ExclusiveUser", "NO"), skv("GraceTime", "0"), skv("Hidden", "NO")},
			{skv("MaxNodes", "UNLIMITED"), skv("MaxTime", "UNLIMITED"), skv("MinNodes", "0"), skv("LLN", "NO"), skv("MaxCPUsPerNode", "UNLIMITED")},
			{skv("Nodes", nullOr(hostlist(names)))},
			{skv("PriorityJobFactor", "1"), skv("PriorityTier", "1"), skv("RootOnly", "NO"), skv("ReqResv", "NO"), skv("OverSubscribe", "NO")},
			{skv("OverTimeLimit", "NONE"), skv("PreemptMode", preempt)},
			{skv("State", "UP"), skv("TotalCPUs", strconv.Itoa(cpus)), skv("TotalNodes", strconv.Itoa(len(names))), skv("SelectTypeParameters", "NONE")},
			{skv("JobDefaults", "(null)")},
			{skv("DefMemPerNode", "UNLIMITED"), skv("MaxMemPerNode", "UNLIMITED")},
			{skv("TRES", fmt.Sprintf("cpu=%d,node=%d,billing=%d", cpus, len(names), cpus))},
		}
		s.writeRecord(rec, one)
	}
	if shown == 0 && name != "" {
		return &slurmPlain{fmt.Sprintf("Partition %s not found", name)}
	}
	return nil
}

// nodeReasonStamp is " [USER@TIME]" after a node's reason when Lattice
// knows who set it and when, as Slurm prints it.
func nodeReasonStamp(s *slurmRun, n *latticev1.Node) string {
	user, ms := nodeReasonBy(n)
	if user == "" || ms == 0 {
		return ""
	}
	return fmt.Sprintf(" [%s@%s]", user, s.slurmDate(ms, ""))
}

// scontrolNodeState is a node's State= as scontrol shows it: the base
// state and its flags, IDLE+DRAIN, ALLOCATED+DRAIN, IDLE+NOT_RESPONDING.
func scontrolNodeState(n *latticev1.Node) string {
	base := "IDLE"
	if n.GetAllocation() != 0 {
		base = "ALLOCATED"
	}
	switch model.NodeState(n.GetState()) {
	case model.NodeDraining, model.NodeDrained:
		return base + "+DRAIN"
	case model.NodeDegraded:
		return base + "+NOT_RESPONDING"
	case model.NodeDown:
		return "DOWN"
	case model.NodeCleanup:
		return base + "+COMPLETING"
	}
	if n.GetReservedFor() != 0 && base == "IDLE" {
		return "RESERVED"
	}
	return base
}
