package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

var sacctOpts = []sopt{
	{"allusers", 'a', noArg, ""}, {"accounts", 'A', needArg, ""}, {"array", 0, noArg, ""}, {"batch-script", 'B', noArg, "!"},
	{"brief", 'b', noArg, ""}, {"completion", 'c', noArg, ""}, {"constraints", 'C', needArg, ""}, {"delimiter", 0, needArg, ""},
	{"duplicates", 'D', noArg, ""}, {"helpformat", 'e', noArg, ""}, {"endtime", 'E', needArg, ""}, {"env-vars", 0, noArg, "!"},
	{"file", 'f', needArg, "!"}, {"flags", 'F', needArg, ""}, {"gid", 'g', needArg, ""}, {"group", 0, needArg, "gid"},
	{"help", 'h', noArg, ""}, {"nnodes", 'i', needArg, ""}, {"ncpus", 'I', needArg, ""}, {"jobs", 'j', needArg, ""},
	{"timelimit-min", 'k', needArg, ""}, {"timelimit-max", 'K', needArg, ""}, {"long", 'l', noArg, ""},
	{"allclusters", 'L', noArg, ""}, {"clusters", 'M', needArg, ""}, {"local", 0, noArg, ""}, {"name", 0, needArg, ""},
	{"noheader", 'n', noArg, ""}, {"noconvert", 0, noArg, ""}, {"nodelist", 'N', needArg, ""}, {"format", 'o', needArg, ""},
	{"parsable", 'p', noArg, ""}, {"parsable2", 'P', noArg, ""}, {"qos", 'q', needArg, ""}, {"partition", 'r', needArg, ""},
	{"reason", 'R', needArg, ""}, {"state", 's', needArg, ""}, {"starttime", 'S', needArg, ""}, {"truncate", 'T', noArg, ""},
	{"uid", 'u', needArg, "user"}, {"user", 0, needArg, "user"}, {"usage", 0, noArg, "help"}, {"verbose", 'v', noArg, ""},
	{"version", 'V', noArg, ""}, {"wckeys", 'W', needArg, ""}, {"associations", 'x', needArg, ""}, {"allocations", 'X', noArg, ""},
	{"whole-hetjob", 0, optArg, ""}, {"units", 0, needArg, ""},
}

// sacctField is one of sacct's fields: its name, its default width
// (negative: left-justified) and its value for a job or a step row.
type sacctField struct {
	name  string
	width int
	value func(s *slurmRun, r sacctRow) string
}

// sacctRow is a job (step == nil) or one of its steps: "batch" for a batch
// script's own step, else an srun step.
type sacctRow struct {
	j     jobRow
	batch bool
	step  *latticev1.Step
}

func (r sacctRow) a() *latticev1.Allocation { return r.j.a }

func (r sacctRow) isStep() bool { return r.batch || r.step != nil }

// usage is what the row used: a step's own (its cgroups on its nodes), or
// the job's (every run of it, its batch script with the steps on its first
// node) for the job and its batch step; nil when not measured.
func (r sacctRow) usage() *latticev1.JobUsage {
	if r.step != nil {
		return r.step.GetUsage()
	}
	return r.a().GetUsage()
}

// sacctFields are in Slurm's order (a name given on the command line is
// the first whose name it is a prefix of, ignoring case).
var sacctFields = []sacctField{
	{"Account", 10, func(_ *slurmRun, r sacctRow) string { return r.a().GetRequest().GetTenant() }},
	{"AllocCPUS", 10, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(sacctCPUs(r)) }},
	{"AllocNodes", 10, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(len(r.a().GetNodes())) }},
	{"AllocTRES", 10, func(_ *slurmRun, r sacctRow) string {
		if len(r.a().GetNodes()) == 0 {
			return ""
		}
		return fmt.Sprintf("cpu=%d,node=%d", sacctCPUs(r), len(r.a().GetNodes()))
	}},
	{"Cluster", 10, func(_ *slurmRun, r sacctRow) string { return "lattice" }},
	{"Comment", 14, func(_ *slurmRun, r sacctRow) string { return "" }},
	{"Constraints", 19, func(_ *slurmRun, r sacctRow) string { return strings.Join(r.a().GetRequest().GetConstraints(), "&") }},
	{"ConsumedEnergy", 14, func(_ *slurmRun, r sacctRow) string { return energyText(r.usage()) }},
	{"CPUTime", 10, func(s *slurmRun, r sacctRow) string { return slurmClock(int64(sacctCPUs(r)) * s.sacctElapsed(r)) }},
	{"CPUTimeRAW", 10, func(s *slurmRun, r sacctRow) string {
		return strconv.FormatInt(int64(sacctCPUs(r))*s.sacctElapsed(r), 10)
	}},
	{"DerivedExitCode", 15, func(_ *slurmRun, r sacctRow) string { return slurmExit(r.a()) }},
	{"Elapsed", 10, func(s *slurmRun, r sacctRow) string { return slurmClock(s.sacctElapsed(r)) }},
	{"ElapsedRaw", 10, func(s *slurmRun, r sacctRow) string { return strconv.FormatInt(s.sacctElapsed(r), 10) }},
	{"Eligible", 19, func(s *slurmRun, r sacctRow) string {
		return s.slurmDate(cmp.Or(r.a().GetEligibleTimeUnixMs(), r.a().GetSubmitTimeUnixMs()), "Unknown")
	}},
	{"End", 19, func(s *slurmRun, r sacctRow) string {
		if r.step != nil {
			return s.slurmDate(r.step.GetEndTimeUnixMs(), "Unknown")
		}
		return s.slurmDate(r.a().GetEndTimeUnixMs(), "Unknown")
	}},
	{"ExitCode", 8, func(_ *slurmRun, r sacctRow) string {
		if r.step != nil {
			if !r.step.GetHasExitCode() {
				return "0:0"
			}
			return fmt.Sprintf("%d:0", r.step.GetExitCode())
		}
		return slurmExit(r.a())
	}},
	{"Flags", 19, func(_ *slurmRun, r sacctRow) string { return "" }},
	{"Group", 9, func(_ *slurmRun, r sacctRow) string { return "" }},
	{"JobID", -12, func(_ *slurmRun, r sacctRow) string { return sacctID(r, r.j.id()) }},
	{"JobIDRaw", -12, func(_ *slurmRun, r sacctRow) string { return sacctID(r, strconv.FormatUint(r.a().GetId(), 10)) }},
	{"JobName", 10, func(_ *slurmRun, r sacctRow) string {
		switch {
		case r.batch:
			return "batch"
		case r.step != nil:
			return cmp.Or(firstWord(r.step.GetCommand()), "step")
		}
		return r.a().GetRequest().GetName()
	}},
	{"MaxRSS", 10, func(_ *slurmRun, r sacctRow) string { return rssText(r.usage()) }},
	{"NCPUS", 10, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(sacctCPUs(r)) }},
	{"NNodes", 8, func(_ *slurmRun, r sacctRow) string {
		if r.step != nil {
			return strconv.Itoa(len(r.step.GetNodes()))
		}
		if r.batch {
			return "1"
		}
		return strconv.Itoa(nodeCount(r.a()))
	}},
	{"NodeList", 15, func(_ *slurmRun, r sacctRow) string {
		switch {
		case r.step != nil:
			return hostlist(r.step.GetNodes())
		case r.batch && len(r.a().GetNodes()) > 0:
			return r.a().GetNodes()[0]
		case len(r.a().GetNodes()) == 0:
			return "None assigned"
		}
		return hostlist(r.a().GetNodes())
	}},
	{"NTasks", 8, func(_ *slurmRun, r sacctRow) string {
		switch {
		case r.step != nil:
			return strconv.Itoa(int(r.step.GetTasks()))
		case r.batch:
			return "1"
		}
		return ""
	}},
	{"Partition", 10, func(_ *slurmRun, r sacctRow) string {
		if r.isStep() {
			return ""
		}
		return r.a().GetRequest().GetVcluster()
	}},
	{"Priority", 10, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(int(r.a().GetRequest().GetPriorityClass())) }},
	{"QOS", 10, func(_ *slurmRun, r sacctRow) string { return cmp.Or(r.a().GetRequest().GetQos(), "normal") }},
	{"Reason", 22, func(_ *slurmRun, r sacctRow) string { return slurmReason(r.a()) }},
	{"ReqCPUS", 8, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(jobCPUs(r.a())) }},
	{"ReqMem", 10, func(_ *slurmRun, r sacctRow) string { return "0" }},
	{"ReqNodes", 8, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(int(r.a().GetRequest().GetNodesMin())) }},
	{"Reservation", 20, func(_ *slurmRun, r sacctRow) string { return "" }},
	{"Restarts", 8, func(_ *slurmRun, r sacctRow) string { return strconv.Itoa(int(r.a().GetRequeueCount())) }},
	{"Start", 19, func(s *slurmRun, r sacctRow) string {
		if r.step != nil {
			return s.slurmDate(r.step.GetStartTimeUnixMs(), "Unknown")
		}
		return s.slurmDate(r.a().GetStartTimeUnixMs(), "Unknown")
	}},
	{"State", 10, func(_ *slurmRun, r sacctRow) string {
		if r.step != nil {
			return cmp.Or(strings.ToUpper(r.step.GetState()), "RUNNING")
		}
		return slurmState(r.a())
	}},
	{"StdErr", 20, func(_ *slurmRun, r sacctRow) string { return r.a().GetRequest().GetStderr() }},
	{"StdOut", 20, func(_ *slurmRun, r sacctRow) string { return r.a().GetRequest().GetStdout() }},
	{"Submit", 19, func(s *slurmRun, r sacctRow) string { return s.slurmDate(r.a().GetSubmitTimeUnixMs(), "Unknown") }},
	{"Suspended", 10, func(_ *slurmRun, r sacctRow) string {
		sec := r.a().GetSuspendedSeconds()
		if ms := r.a().GetSuspendedUnixMs(); ms > 0 && !r.isStep() {
			sec += max(0, (time.Now().UnixMilli()-ms)/1000)
		}
		return slurmClock(sec)
	}},
	{"SystemCPU", 10, func(_ *slurmRun, r sacctRow) string {
		return cpuTime(r.usage().GetSystemCpuSeconds(), r.usage() != nil)
	}},
	{"Timelimit", 10, func(_ *slurmRun, r sacctRow) string {
		if r.isStep() {
			return ""
		}
		if w := r.a().GetRequest().GetWalltimeSeconds(); w > 0 {
			return slurmClock(w)
		}
		return "UNLIMITED"
	}},
	{"TimelimitRaw", 10, func(_ *slurmRun, r sacctRow) string {
		if r.isStep() {
			return ""
		}
		return strconv.FormatInt(r.a().GetRequest().GetWalltimeSeconds()/60, 10)
	}},
	{"TotalCPU", 10, func(_ *slurmRun, r sacctRow) string {
		u := r.usage()
		return cpuTime(u.GetUserCpuSeconds()+u.GetSystemCpuSeconds(), u != nil)
	}},
	{"User", 9, func(_ *slurmRun, r sacctRow) string {
		if r.isStep() {
			return ""
		}
		return slurmUser(r.a())
	}},
	{"UserCPU", 10, func(_ *slurmRun, r sacctRow) string { return cpuTime(r.usage().GetUserCpuSeconds(), r.usage() != nil) }},
	{"WCKey", 10, func(_ *slurmRun, r sacctRow) string { return r.a().GetRequest().GetProject() }},
	{"WorkDir", 20, func(_ *slurmRun, r sacctRow) string { return r.a().GetRequest().GetWorkDir() }},
}

func firstWord(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func sacctID(r sacctRow, id string) string {
	switch {
	case r.batch:
		return id + ".batch"
	case r.step != nil:
		return fmt.Sprintf("%s.%d", id, r.step.GetId())
	}
	return id
}

func sacctCPUs(r sacctRow) int {
	switch {
	case r.step != nil:
		return max(len(r.step.GetNodes()), 1)
	case r.batch:
		return 1
	case len(r.a().GetNodes()) == 0:
		return 0
	}
	return len(r.a().GetNodes())
}

func (s *slurmRun) sacctElapsed(r sacctRow) int64 {
	if r.step != nil {
		st, end := r.step.GetStartTimeUnixMs(), r.step.GetEndTimeUnixMs()
		if st == 0 {
			return 0
		}
		if end == 0 {
			end = s.Now().UnixMilli()
		}
		return max(end-st, 0) / 1000
	}
	return int64(s.runDuration(r.a()) / time.Second)
}

// Slurm 22.05's sacct field lists.
const (
	sacctDefaultFields = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
	sacctBriefFields   = "JobID,State,ExitCode"
	sacctLongFields    = "JobID,JobIDRaw,JobName,Partition,NCPUS,NNodes,AllocNodes,AllocTRES,Elapsed,CPUTime,CPUTimeRAW,State,ExitCode,DerivedExitCode,Start,End,Submit,Eligible,Timelimit,User,Account,QOS,NodeList,WorkDir"
)

type sacctCol struct {
	f     *sacctField
	width int
}

func parseSacctFields(s string) ([]sacctCol, error) {
	var cols []sacctCol
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, hasW := strings.Cut(part, "%")
		var f *sacctField
		for i := range sacctFields {
			if len(name) > 0 && len(name) <= len(sacctFields[i].name) && strings.EqualFold(sacctFields[i].name[:len(name)], name) {
				f = &sacctFields[i]
				break
			}
		}
		if f == nil {
			return nil, fmt.Errorf("Invalid field requested: \"%s\"", name)
		}
		col := sacctCol{f: f, width: f.width}
		if hasW {
			if n, _ := strconv.Atoi(w); n != 0 {
				col.width = n
			}
		}
		cols = append(cols, col)
	}
	return cols, nil
}

// sacctCell is print_fields_str: cut with '+', right-justified unless the
// width is negative, and a space after.
func sacctCell(b *strings.Builder, v string, width int) {
	abs := width
	if abs < 0 {
		abs = -abs
	}
	if len(v) > abs && abs > 0 {
		v = v[:abs-1] + "+"
	}
	pad := strings.Repeat(" ", max(abs-len(v), 0))
	if width > 0 {
		b.WriteString(pad + v)
	} else {
		b.WriteString(v + pad)
	}
	b.WriteByte(' ')
}

func (s *slurmRun) sacct(args []string) error {
	a, err := s.parse(sacctOpts, args, false, "Usage: sacct [-a] [-A account] [-b] [-E end] [-j jobs] [-n] [-o format] [-p|-P]\n             [-r partition] [-s state] [-S start] [-u user] [-X] [--name names]\n")
	if a == nil {
		return err
	}
	if a.has("helpformat") {
		var names []string
		for _, f := range sacctFields {
			names = append(names, f.name)
		}
		fmt.Fprintln(s.Stdout, strings.Join(names, " "))
		return nil
	}
	if len(a.pos) > 0 {
		return fmt.Errorf("Unknown arguments: %s", strings.Join(a.pos, " "))
	}
	fields := cmp.Or(s.Getenv("SACCT_FORMAT"), sacctDefaultFields)
	var extra []string
	if a.has("brief") {
		extra = append(extra, sacctBriefFields)
	}
	if a.has("long") {
		extra = append(extra, sacctLongFields)
	}
	for _, v := range a.vals["format"] {
		extra = append(extra, v)
	}
	if len(extra) > 0 {
		fields = strings.Join(extra, ",")
	}
	cols, err := parseSacctFields(fields)
	if err != nil {
		return err
	}
	ids := a.list("jobs")
	want, err := expandIDs(ids)
	if err != nil {
		return fmt.Errorf("Invalid job id: %s", strings.Join(ids, ","))
	}
	now := s.Now()
	// Slurm's window: since midnight; with -j or -s and no -S, any time
	// (-s: the jobs in that state now).
	startDefault := "midnight"
	if len(want) > 0 || a.has("state") {
		startDefault = ""
	}
	var from time.Time
	if v := cmp.Or(a.get("starttime"), startDefault); v != "" {
		if from, err = parseSlurmTime("starttime", v, now, s.Location); err != nil {
			return err
		}
	}
	to := now
	if v := a.get("endtime"); v != "" {
		if to, err = parseSlurmTime("endtime", v, now, s.Location); err != nil {
			return err
		}
	}
	var states map[string]bool
	if a.has("state") {
		if states, err = parseSlurmStates(s.name, a.get("state")); err != nil {
			return err
		}
	}
	req := &latticev1.ListAllocationsRequest{TerminalWindowSeconds: 400 * 24 * 3600}
	if !from.IsZero() {
		req.TerminalWindowSeconds = int64(now.Sub(from)/time.Second) + 60
	}
	if req.TerminalWindowSeconds < 60 {
		req.TerminalWindowSeconds = 60
	}
	all, err := s.listAllocations(s.c, req)
	if err != nil {
		return err
	}
	users, accounts, names, parts := a.list("user"), a.list("accounts"), a.list("name"), a.list("partition")
	var allocs []*latticev1.Allocation
	for _, al := range all {
		r := al.GetRequest()
		if len(want) > 0 && !slices.ContainsFunc(want, func(w string) bool {
			return w == displayID(al) || w == strconv.FormatUint(al.GetId(), 10) || w == strconv.FormatUint(al.GetArrayJobId(), 10)
		}) {
			continue
		}
		if (states != nil && !states[slurmState(al)]) ||
			(len(users) > 0 && !slices.Contains(users, slurmUser(al))) ||
			(len(accounts) > 0 && !slices.Contains(accounts, r.GetTenant())) ||
			(len(names) > 0 && !slices.Contains(names, r.GetName())) ||
			(len(parts) > 0 && !slices.Contains(parts, r.GetVcluster())) {
			continue
		}
		if !from.IsZero() && !activeBetween(al, from, to) {
			continue
		}
		allocs = append(allocs, al)
	}
	slices.SortStableFunc(allocs, func(x, y *latticev1.Allocation) int {
		return cmp.Or(cmp.Compare(cmp.Or(x.GetArrayJobId(), x.GetId()), cmp.Or(y.GetArrayJobId(), y.GetId())), cmp.Compare(x.GetId(), y.GetId()))
	})
	var rows []sacctRow
	jobs := collapseArrays(allocs)
	if a.has("array") {
		jobs = jobs[:0]
		for _, al := range allocs {
			jobs = append(jobs, jobRow{a: al})
		}
	}
	for _, j := range jobs {
		rows = append(rows, sacctRow{j: j})
		if a.has("allocations") || j.tasks != nil {
			continue
		}
		if j.a.GetRequest().GetScript() != "" && j.a.GetStartTimeUnixMs() != 0 {
			rows = append(rows, sacctRow{j: j, batch: true})
		}
		for _, st := range j.a.GetSteps() {
			rows = append(rows, sacctRow{j: j, step: st})
		}
	}
	delim := "|"
	if a.has("delimiter") {
		delim = a.get("delimiter")
	}
	parsable := a.has("parsable") || a.has("parsable2")
	ending := a.has("parsable") && !a.has("parsable2")
	var b strings.Builder
	line := func(get func(c sacctCol) string) {
		b.Reset()
		for i, c := range cols {
			v := get(c)
			switch {
			case parsable:
				b.WriteString(v)
				if ending || i < len(cols)-1 {
					b.WriteString(delim)
				}
			default:
				sacctCell(&b, v, c.width)
			}
		}
		b.WriteByte('\n')
		fmt.Fprint(s.Stdout, b.String())
	}
	if !a.has("noheader") && parsable {
		line(func(c sacctCol) string { return c.f.name })
	}
	if !a.has("noheader") && !parsable {
		// print_fields_header: the name cut (no '+') and justified.
		b.Reset()
		for _, c := range cols {
			w, name := c.width, c.f.name
			if abs := max(w, -w); len(name) > abs {
				name = name[:abs]
			}
			if w > 0 {
				fmt.Fprintf(&b, "%*s ", w, name)
			} else {
				fmt.Fprintf(&b, "%-*s ", -w, name)
			}
		}
		b.WriteByte('\n')
		fmt.Fprint(s.Stdout, b.String())
		{
			b.Reset()
			for _, c := range cols {
				w := c.width
				if w < 0 {
					w = -w
				}
				b.WriteString(strings.Repeat("-", w) + " ")
			}
			b.WriteByte('\n')
			fmt.Fprint(s.Stdout, b.String())
		}
	}
	for _, r := range rows {
		line(func(c sacctCol) string {
			v := c.f.value(s, r)
			if v == "" && !parsable {
				return ""
			}
			return v
		})
	}
	return nil
}
