package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

var squeueOpts = []sopt{
	{"account", 'A', needArg, ""}, {"all", 'a', noArg, ""}, {"array", 'r', noArg, ""}, {"array-unique", 0, noArg, ""},
	{"clusters", 'M', needArg, ""}, {"federation", 0, noArg, ""}, {"format", 'o', needArg, ""}, {"Format", 'O', needArg, ""},
	{"noheader", 'h', noArg, ""}, {"help", 0, noArg, ""}, {"hide", 0, noArg, ""}, {"iterate", 'i', needArg, "!"},
	{"jobs", 'j', needArg, ""}, {"licenses", 'L', needArg, "!"}, {"local", 0, noArg, ""}, {"long", 'l', noArg, ""},
	{"me", 0, noArg, ""}, {"name", 'n', needArg, ""}, {"noconvert", 0, noArg, ""}, {"partition", 'p', needArg, ""},
	{"priority", 'P', noArg, ""}, {"qos", 'q', needArg, ""}, {"reservation", 'R', needArg, ""}, {"sibling", 0, noArg, ""},
	{"sort", 'S', needArg, ""}, {"start", 0, noArg, ""}, {"steps", 's', optArg, ""}, {"states", 't', needArg, ""},
	{"user", 'u', needArg, ""}, {"usage", 0, noArg, "help"}, {"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""},
	{"nodelist", 'w', needArg, ""},
}

// squeueField is one column squeue prints: by its letter (-o %i) and by
// its name (-O JobID).
type squeueField struct {
	letter byte
	name   string // -O name
	header string
	value  func(s *slurmRun, j jobRow) string
}

var squeueFields = []squeueField{
	{'i', "JobArrayID", "JOBID", func(_ *slurmRun, j jobRow) string { return j.id() }},
	{'A', "JobID", "JOBID", func(_ *slurmRun, j jobRow) string {
		if j.tasks != nil { // the array's own record
			return strconv.FormatUint(j.a.GetArrayJobId(), 10)
		}
		return strconv.FormatUint(j.a.GetId(), 10)
	}},
	{'F', "ArrayJobID", "ARRAY_JOB_ID", func(_ *slurmRun, j jobRow) string { return j.arrayJobID() }},
	{'K', "ArrayTaskID", "ARRAY_TASK_ID", func(_ *slurmRun, j jobRow) string { return j.taskID() }},
	{'j', "Name", "NAME", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetName() }},
	{'u', "UserName", "USER", func(_ *slurmRun, j jobRow) string { return slurmUser(j.a) }},
	{'a', "Account", "ACCOUNT", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetTenant() }},
	{'P', "Partition", "PARTITION", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetVcluster() }},
	{'T', "State", "STATE", func(_ *slurmRun, j jobRow) string { return slurmState(j.a) }},
	{'t', "StateCompact", "ST", func(_ *slurmRun, j jobRow) string { return slurmShortState(j.a) }},
	{'M', "TimeUsed", "TIME", func(s *slurmRun, j jobRow) string { return s.runTime(j.a) }},
	{'l', "TimeLimit", "TIME_LIMIT", func(_ *slurmRun, j jobRow) string { return slurmLimit(j.a.GetRequest().GetWalltimeSeconds()) }},
	{'L', "TimeLeft", "TIME_LEFT", func(s *slurmRun, j jobRow) string {
		left := j.a.GetRequest().GetWalltimeSeconds() - int64(s.runDuration(j.a).Seconds())
		return slurmSecs(max(left, 0))
	}},
	{'D', "NumNodes", "NODES", func(_ *slurmRun, j jobRow) string { return strconv.Itoa(nodeCount(j.a)) }},
	{'C', "NumCPUs", "CPUS", func(_ *slurmRun, j jobRow) string { return strconv.Itoa(jobCPUs(j.a)) }},
	{'N', "NodeList", "NODELIST", func(_ *slurmRun, j jobRow) string { return runningNodes(j.a) }},
	{'R', "ReasonList", "NODELIST(REASON)", func(_ *slurmRun, j jobRow) string {
		if n := runningNodes(j.a); n != "" {
			return n
		}
		return "(" + slurmReason(j.a) + ")"
	}},
	{'r', "Reason", "REASON", func(_ *slurmRun, j jobRow) string { return slurmReason(j.a) }},
	{'V', "SubmitTime", "SUBMIT_TIME", func(s *slurmRun, j jobRow) string { return s.slurmDate(j.a.GetSubmitTimeUnixMs(), "N/A") }},
	{'S', "StartTime", "START_TIME", func(s *slurmRun, j jobRow) string {
		ms := j.a.GetStartTimeUnixMs()
		if model.AllocState(j.a.GetState()) == model.StatePending {
			ms = j.a.GetExplanation().GetExpectedStartUnixMs()
		}
		return s.slurmDate(ms, "N/A")
	}},
	{'e', "EndTime", "END_TIME", func(s *slurmRun, j jobRow) string {
		ms := j.a.GetEndTimeUnixMs()
		if ms == 0 && j.a.GetStartTimeUnixMs() != 0 && model.AllocState(j.a.GetState()).Active() {
			ms = j.a.GetStartTimeUnixMs() + j.a.GetRequest().GetWalltimeSeconds()*1000
		}
		return s.slurmDate(ms, "N/A")
	}},
	{'Q', "Priority", "PRIORITY", func(_ *slurmRun, j jobRow) string { return strconv.Itoa(slurmPriority(j.a)) }},
	{'q', "QOS", "QOS", func(_ *slurmRun, j jobRow) string { return nullOr(j.a.GetRequest().GetQos()) }},
	{'Z', "WorkDir", "WORK_DIR", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetWorkDir() }},
	{'o', "Command", "COMMAND", func(_ *slurmRun, j jobRow) string { return jobCommand(j.a) }},
	{'E', "Dependency", "DEPENDENCY", func(_ *slurmRun, j jobRow) string { return cmp.Or(dependencyText(j.a), "(null)") }},
	{'f', "Feature", "FEATURES", func(_ *slurmRun, j jobRow) string {
		return cmp.Or(strings.Join(j.a.GetRequest().GetConstraints(), "&"), "(null)")
	}},
	{'w', "WCKey", "WCKEY", func(_ *slurmRun, j jobRow) string { return cmp.Or(j.a.GetRequest().GetProject(), "(null)") }},
	{'v', "Reservation", "RESERVATION", func(_ *slurmRun, j jobRow) string { return "(null)" }},
	{'B', "BatchHost", "EXEC_HOST", func(_ *slurmRun, j jobRow) string {
		if n := j.a.GetNodes(); len(n) > 0 && model.AllocState(j.a.GetState()).Active() {
			return n[0]
		}
		return "n/a"
	}},
	{'Y', "SchedNodes", "SCHEDNODES", func(_ *slurmRun, j jobRow) string {
		return cmp.Or(hostlist(j.a.GetExplanation().GetNodes()), "(null)")
	}},
	{'k', "Comment", "COMMENT", func(_ *slurmRun, j jobRow) string { return "(null)" }},
	{'m', "MinMemory", "MIN_MEMORY", func(_ *slurmRun, j jobRow) string { return "0" }},
	{'c', "MinCpus", "MIN_CPUS", func(_ *slurmRun, j jobRow) string { return "1" }},
	{'h', "OverSubscribe", "OVER_SUBSCRIBE", func(_ *slurmRun, j jobRow) string { return "NO" }},
	{'U', "UserID", "UID", func(_ *slurmRun, j jobRow) string { return slurmUser(j.a) }},
	{'x', "ExcNodes", "EXC_NODES", func(_ *slurmRun, j jobRow) string { return hostlist(j.a.GetRequest().GetExcludeNodes()) }},
	{'n', "ReqNodes", "REQ_NODES", func(_ *slurmRun, j jobRow) string { return hostlist(j.a.GetRequest().GetNodeList()) }},
	{'p', "PriorityLong", "PRIORITY", func(_ *slurmRun, j jobRow) string {
		return fmt.Sprintf("%.8f", float64(j.a.GetRequest().GetPriorityClass())/model.MaxPriorityClass)
	}},
	{0, "exit_code", "EXIT_CODE", func(_ *slurmRun, j jobRow) string { return slurmExit(j.a) }},
	{0, "STDOUT", "STDOUT", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetStdout() }},
	{0, "STDERR", "STDERR", func(_ *slurmRun, j jobRow) string { return j.a.GetRequest().GetStderr() }},
	{0, "EligibleTime", "ELIGIBLE_TIME", func(s *slurmRun, j jobRow) string { return s.slurmDate(j.a.GetEligibleTimeUnixMs(), "N/A") }},
	{0, "RestartCnt", "RESTARTCNT", func(_ *slurmRun, j jobRow) string { return strconv.Itoa(int(j.a.GetRequeueCount())) }},
	{0, "Requeue", "REQUEUE", func(_ *slurmRun, j jobRow) string { return boolDigit(j.a.GetRequest().GetRequeue()) }},
	{0, "Cluster", "CLUSTER", func(_ *slurmRun, j jobRow) string { return "lattice" }},
}

// slurmPriority is a job's priority as Slurm shows it: its class, and 0
// while it is held (Slurm holds a job by setting its priority to 0).
func slurmPriority(a *latticev1.Allocation) int {
	switch a.GetReason() {
	case model.ReasonJobHeldUser, model.ReasonJobHeldAdmin:
		if model.AllocState(a.GetState()) == model.StatePending {
			return 0
		}
	}
	return int(a.GetRequest().GetPriorityClass())
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// runningNodes is the node list of a job that holds nodes, "" otherwise.
func runningNodes(a *latticev1.Allocation) string {
	if len(allocNodes(a)) == 0 || model.AllocState(a.GetState()) == model.StatePending {
		return ""
	}
	return hostlist(allocNodes(a))
}

// jobCPUs is the CPUs a job holds (whole nodes), or asks for.
func jobCPUs(a *latticev1.Allocation) int { return max(nodeCount(a), 1) }

// slurmLimit is squeue's TIME_LIMIT.
func slurmLimit(secs int64) string {
	if secs <= 0 {
		return "UNLIMITED"
	}
	return slurmSecs(secs)
}

func jobCommand(a *latticev1.Allocation) string {
	if c := a.GetRequest().GetCommand(); len(c) > 0 {
		return strings.Join(c, " ")
	}
	return "(null)"
}

func dependencyText(a *latticev1.Allocation) string {
	var parts []string
	for _, d := range a.GetRequest().GetDependsOn() {
		p := d.GetCondition()
		for _, id := range d.GetIds() {
			p += ":" + strconv.FormatUint(id, 10)
		}
		parts = append(parts, p)
	}
	sep := ","
	if a.GetRequest().GetDependencyAny() {
		sep = "?"
	}
	return strings.Join(parts, sep)
}

// squeueCol is one column of a format: literal text before it, the field,
// its width (0: as wide as its value) and justification.
type squeueCol struct {
	prefix string
	field  *squeueField
	width  int
	right  bool
	suffix string // -O's suffix
}

// parseSqueueFormat reads -o's "%.18i %.9P %j": %[.][WIDTH]LETTER with any
// text between.
func parseSqueueFormat(s string) ([]squeueCol, string, error) {
	var cols []squeueCol
	rest := s
	for {
		i := strings.IndexByte(rest, '%')
		if i < 0 {
			return cols, rest, nil
		}
		col := squeueCol{prefix: rest[:i]}
		rest = rest[i+1:]
		if strings.HasPrefix(rest, ".") {
			col.right, rest = true, rest[1:]
		}
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		col.width, _ = strconv.Atoi(rest[:j])
		rest = rest[j:]
		if rest == "" {
			return nil, "", fmt.Errorf("Invalid job format specification: %s", s)
		}
		letter := rest[0]
		rest = rest[1:]
		for k := range squeueFields {
			if squeueFields[k].letter == letter {
				col.field = &squeueFields[k]
			}
		}
		if col.field == nil {
			if letter == '%' {
				col.prefix += "%"
				rest = col.prefix + rest
				continue
			}
			return nil, "", fmt.Errorf("Invalid job format specification: %c", letter)
		}
		cols = append(cols, col)
	}
}

// parseSqueueFormatLong reads -O's "JobID:10,Name:.20": NAME[:[.][SIZE][SUFFIX]],
// 20 wide unless given.
func parseSqueueFormatLong(s string) ([]squeueCol, error) {
	var cols []squeueCol
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		name, spec, _ := strings.Cut(part, ":")
		col := squeueCol{width: 20}
		for k := range squeueFields {
			if strings.EqualFold(squeueFields[k].name, name) {
				col.field = &squeueFields[k]
			}
		}
		if col.field == nil {
			return nil, fmt.Errorf("Invalid job format specification: %s", name)
		}
		if strings.HasPrefix(spec, ".") {
			col.right, spec = true, spec[1:]
		}
		j := 0
		for j < len(spec) && spec[j] >= '0' && spec[j] <= '9' {
			j++
		}
		if j > 0 {
			col.width, _ = strconv.Atoi(spec[:j])
		}
		col.suffix = spec[j:]
		cols = append(cols, col)
	}
	return cols, nil
}

// slurmCell prints s in width as squeue's _print_str does: cut to width,
// padded on the right, or on the left with '.'.
func slurmCell(b *strings.Builder, s string, width int, right bool) {
	if width <= 0 {
		b.WriteString(s)
		return
	}
	if utf8.RuneCountInString(s) > width {
		s = string([]rune(s)[:width])
	}
	pad := strings.Repeat(" ", width-utf8.RuneCountInString(s))
	if right {
		b.WriteString(pad + s)
	} else {
		b.WriteString(s + pad)
	}
}

func writeSqueue(s *slurmRun, cols []squeueCol, tail string, rows []jobRow, header bool) {
	var b strings.Builder
	line := func(get func(c squeueCol) string) {
		b.Reset()
		for _, c := range cols {
			b.WriteString(c.prefix)
			slurmCell(&b, get(c), c.width, c.right)
			b.WriteString(c.suffix)
		}
		b.WriteString(tail)
		b.WriteByte('\n')
		fmt.Fprint(s.Stdout, b.String())
	}
	if header {
		line(func(c squeueCol) string { return c.field.header })
	}
	for _, j := range rows {
		line(func(c squeueCol) string { return c.field.value(s, j) })
	}
}

// Slurm 22.05's squeue formats.
const (
	squeueDefault = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
	squeueLong    = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
	squeueStart   = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
)

func (s *slurmRun) squeue(args []string) error {
	a, err := s.parse(squeueOpts, args, false, "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n              [-n name] [-o format] [-O fields] [-p partitions] [--qos qos]\n              [--reservation reservation] [--sort fields] [--start]\n              [--step step_id] [-t states] [-u user_name] [--usage]\n              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n              [-ahjlrsv]\n")
	if a == nil {
		return err
	}
	if len(a.pos) > 0 {
		return &slurmUsage{fmt.Sprintf("unrecognized argument '%s'", a.pos[0])}
	}
	var cols []squeueCol
	tail := ""
	format := cmp.Or(s.Getenv("SQUEUE_FORMAT"), squeueDefault)
	switch {
	case a.has("format"):
		format = a.get("format")
	case a.has("Format"):
		format = ""
	case a.has("start"):
		format = squeueStart
	case a.has("long"):
		format = squeueLong
	case s.Getenv("SQUEUE_FORMAT") == "" && s.Getenv("SQUEUE_FORMAT2") != "":
		format = ""
	}
	if format != "" {
		if cols, tail, err = parseSqueueFormat(format); err != nil {
			return err
		}
	} else {
		if cols, err = parseSqueueFormatLong(cmp.Or(a.get("Format"), s.Getenv("SQUEUE_FORMAT2"))); err != nil {
			return err
		}
	}

	ids := a.list("jobs")
	want, err := expandIDs(ids)
	if err != nil {
		return fmt.Errorf("Invalid job id: %s", strings.Join(ids, ","))
	}
	req := &latticev1.ListAllocationsRequest{}
	states := slurmActive
	if a.has("states") {
		if states, err = parseSlurmStates(s.name, a.get("states")); err != nil {
			return err
		}
		req.TerminalWindowSeconds = 300 // Slurm keeps ended jobs MinJobAge (300 s)
	} else if len(want) > 0 {
		// A job that ended within MinJobAge is known (no "Invalid job
		// id") but, as in Slurm, not shown without -t.
		req.TerminalWindowSeconds = 300
	}
	if a.has("start") {
		states = map[string]bool{"PENDING": true}
	}
	users := a.list("user")
	if a.has("me") {
		cn, err := s.connect(s.c)
		if err != nil {
			return err
		}
		users = append(users, s.tenantUser(cn))
	}
	accounts, names, parts, qos := a.list("account"), a.list("name"), a.list("partition"), a.list("qos")
	var nodes []string
	if a.has("nodelist") {
		if nodes, err = model.ExpandHostlist(a.get("nodelist")); err != nil {
			return fmt.Errorf("Invalid node name list: %s", a.get("nodelist"))
		}
	}
	all, err := s.listAllocations(s.c, req)
	if err != nil {
		return fmt.Errorf("slurm_load_jobs error: %w", err)
	}
	var allocs []*latticev1.Allocation
	matchID := func(al *latticev1.Allocation) bool {
		if len(want) == 0 {
			return true
		}
		d := displayID(al)
		for _, w := range want {
			if w == d || w == strconv.FormatUint(al.GetId(), 10) || w == strconv.FormatUint(al.GetArrayJobId(), 10) {
				return true
			}
		}
		return false
	}
	for _, al := range all {
		r := al.GetRequest()
		if !matchID(al) || (states != nil && !states[slurmState(al)]) ||
			(len(users) > 0 && !slices.Contains(users, slurmUser(al))) ||
			(len(accounts) > 0 && !slices.Contains(accounts, r.GetTenant())) ||
			(len(names) > 0 && !slices.Contains(names, r.GetName())) ||
			(len(parts) > 0 && !slices.Contains(parts, r.GetVcluster())) ||
			(len(qos) > 0 && !slices.Contains(qos, cmp.Or(r.GetQos(), "normal"))) ||
			(len(nodes) > 0 && !slices.ContainsFunc(al.GetNodes(), func(n string) bool { return slices.Contains(nodes, n) })) {
			continue
		}
		allocs = append(allocs, al)
	}
	if len(ids) == 1 && len(allocs) == 0 && !strings.Contains(ids[0], "_") && len(want) == 1 {
		// squeue -j ID of a job it does not know: Slurm's error, exit 1.
		found := slices.ContainsFunc(all, matchID)
		if !found {
			return &slurmPlain{"slurm_load_jobs error: Invalid job id specified"}
		}
	}
	sortSqueue(allocs)
	rows := make([]jobRow, 0, len(allocs))
	if a.has("array") {
		for _, al := range allocs {
			rows = append(rows, jobRow{a: al})
		}
	} else {
		rows = collapseArrays(allocs)
	}
	if a.has("long") && !a.has("format") && !a.has("Format") {
		fmt.Fprintln(s.Stdout, s.Now().In(s.Location).Format("Mon Jan 02 15:04:05 2006"))
	}
	writeSqueue(s, cols, tail, rows, !a.has("noheader"))
	return nil
}

// slurmPlain is an error Slurm prints without the "cmd: error:" prefix.
type slurmPlain struct{ msg string }

func (p *slurmPlain) Error() string { return p.msg }

// sortSqueue is squeue's default order: by partition, then state (pending
// before running), then priority (highest first), then newest first (the
// controller's job list order, which Slurm's stable sort keeps), an
// array's tasks in index order.
func sortSqueue(allocs []*latticev1.Allocation) {
	rank := func(a *latticev1.Allocation) int {
		switch slurmState(a) {
		case "PENDING":
			return 0
		case "RUNNING", "CONFIGURING":
			return 1
		case "SUSPENDED":
			return 2
		}
		return 3
	}
	slices.SortStableFunc(allocs, func(x, y *latticev1.Allocation) int {
		return cmp.Or(cmp.Compare(x.GetRequest().GetVcluster(), y.GetRequest().GetVcluster()),
			cmp.Compare(rank(x), rank(y)),
			-cmp.Compare(slurmPriority(x), slurmPriority(y)),
			-cmp.Compare(cmp.Or(x.GetArrayJobId(), x.GetId()), cmp.Or(y.GetArrayJobId(), y.GetId())),
			cmp.Compare(x.GetArrayIndex(), y.GetArrayIndex()))
	})
}
