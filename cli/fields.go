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

// ---- state filters ----

// stateFilter is one word of --state: a Lattice state, optionally narrowed
// by the reason it ended with (Slurm's TO is a FAILED allocation that
// exceeded its walltime), or nothing at all (CG: Lattice has no COMPLETING
// state; an ending allocation stays RUNNING until its agent reports).
type stateFilter struct {
	state  model.AllocState
	reason string // "" = any
	none   bool
}

// slurmStates maps Slurm's short and long state names that have a Lattice
// counterpart but no exact Lattice state name. (OutOfMemory is not reported
// by agents yet; OOM is accepted and matches what will carry it.)
var slurmStates = map[string]stateFilter{
	"TO": {state: model.StateFailed, reason: model.ReasonWalltimeExceeded}, "TIMEOUT": {state: model.StateFailed, reason: model.ReasonWalltimeExceeded},
	"NF": {state: model.StateFailed, reason: model.ReasonNodeFailure}, "NODE_FAIL": {state: model.StateFailed, reason: model.ReasonNodeFailure},
	"PR": {state: model.StateFailed, reason: model.ReasonPreempted}, "PREEMPTED": {state: model.StateFailed, reason: model.ReasonPreempted},
	"OOM": {state: model.StateFailed, reason: "OutOfMemory"}, "OUT_OF_MEMORY": {state: model.StateFailed, reason: "OutOfMemory"},
	"CF": {state: model.StateStaging}, "CONFIGURING": {state: model.StateStaging},
	"CG": {none: true}, "COMPLETING": {none: true},
}

// allowedStates is the help text of --state.
const allowedStates = "PENDING, STAGING, RUNNING, CHECKPOINTING, SUSPENDED, COMPLETED, FAILED, CANCELLED, " +
	"or Slurm's PD, CF, R, S, CG, CD, F, CA, TO (TIMEOUT), NF (NODE_FAIL), PR (PREEMPTED), OOM"

// parseStateFilters reads --state STATE[,STATE...].
func parseStateFilters(s string) ([]stateFilter, error) {
	var out []stateFilter
	for _, part := range strings.Split(s, ",") {
		word := strings.ToUpper(strings.TrimSpace(part))
		if f, ok := slurmStates[word]; ok {
			out = append(out, f)
			continue
		}
		st, err := model.ParseAllocState(word)
		if err != nil {
			return nil, &model.FieldError{Field: "state", Value: part, Allowed: allowedStates}
		}
		out = append(out, stateFilter{state: st})
	}
	return out, nil
}

// serverStates is what to ask the server for: the Lattice states the
// filters name, without duplicates.
func serverStates(fs []stateFilter) []string {
	var out []string
	for _, f := range fs {
		if !f.none && !slices.Contains(out, string(f.state)) {
			out = append(out, string(f.state))
		}
	}
	return out
}

// matchStates reports whether a passes any of fs (all pass when fs is empty).
func matchStates(fs []stateFilter, a *latticev1.Allocation) bool {
	if len(fs) == 0 {
		return true
	}
	for _, f := range fs {
		if !f.none && a.GetState() == string(f.state) && (f.reason == "" || a.GetReason() == f.reason) {
			return true
		}
	}
	return false
}

// shortState is squeue's compact state (%t): PD, R, CD, F, CA, TO, ...
func shortState(a *latticev1.Allocation) string {
	switch model.AllocState(a.GetState()) {
	case model.StatePending:
		return "PD"
	case model.StateStaging:
		return "CF"
	case model.StateRunning:
		if a.GetSuspendedUnixMs() != 0 {
			return "S" // suspended by an admin (latticectl suspend)
		}
		return "R"
	case model.StateCheckpointing:
		return "CK"
	case model.StateSuspended:
		return "S"
	case model.StateCompleted:
		return "CD"
	case model.StateCancelled:
		return "CA"
	case model.StateFailed:
		switch a.GetReason() {
		case model.ReasonWalltimeExceeded:
			return "TO"
		case model.ReasonNodeFailure:
			return "NF"
		case model.ReasonPreempted:
			return "PR"
		case "OutOfMemory":
			return "OOM"
		}
		return "F"
	}
	return a.GetState()
}

// userOf is who submitted a: the authenticated user the server recorded,
// else (no authentication) its tenant.
func userOf(a *latticev1.Allocation) string {
	return cmp.Or(a.GetRequest().GetUser(), a.GetRequest().GetTenant())
}

// ---- output fields (status --format, history --format) ----

// allocField is one column a listing of allocations can show: by its
// squeue letter (%i) or by name (JobID, as sacct --format and squeue -O).
type allocField struct {
	letter byte
	names  []string // lower case; the first is the canonical one
	header string
	value  func(r *runner, a *latticev1.Allocation) string
}

var allocFields = []allocField{
	{'i', []string{"id", "jobid"}, "ID", func(_ *runner, a *latticev1.Allocation) string { return displayID(a) }},
	{'j', []string{"name", "jobname"}, "NAME", func(_ *runner, a *latticev1.Allocation) string { return a.GetRequest().GetName() }},
	{'u', []string{"user", "username"}, "USER", func(_ *runner, a *latticev1.Allocation) string { return userOf(a) }},
	{'a', []string{"tenant", "account"}, "TENANT", func(_ *runner, a *latticev1.Allocation) string { return a.GetRequest().GetTenant() }},
	{'P', []string{"vcluster", "partition"}, "VCLUSTER", func(_ *runner, a *latticev1.Allocation) string {
		return orDash(a.GetRequest().GetVcluster())
	}},
	{'T', []string{"state"}, "STATE", func(_ *runner, a *latticev1.Allocation) string { return a.GetState() }},
	{'t', []string{"st", "statecompact"}, "ST", func(_ *runner, a *latticev1.Allocation) string { return shortState(a) }},
	{'M', []string{"time", "elapsed", "timeused"}, "TIME", func(r *runner, a *latticev1.Allocation) string { return r.runTime(a) }},
	{'l', []string{"timelimit", "walltime"}, "TIME_LIMIT", func(_ *runner, a *latticev1.Allocation) string {
		return model.FormatWalltime(secondsDur(a.GetRequest().GetWalltimeSeconds()))
	}},
	{'D', []string{"nodes", "numnodes", "nnodes"}, "NODES", func(_ *runner, a *latticev1.Allocation) string { return strconv.Itoa(nodeCount(a)) }},
	{'N', []string{"nodelist"}, "NODELIST", func(_ *runner, a *latticev1.Allocation) string { return orDash(hostlist(allocNodes(a))) }},
	{'R', []string{"nodelist(reason)", "reasonlist"}, "NODELIST(REASON)", func(_ *runner, a *latticev1.Allocation) string { return nodelistReason(a) }},
	{'r', []string{"reason"}, "REASON", func(_ *runner, a *latticev1.Allocation) string { return orDash(a.GetReason()) }},
	{'V', []string{"submit", "submittime"}, "SUBMIT_TIME", func(r *runner, a *latticev1.Allocation) string { return r.tableTime(a.GetSubmitTimeUnixMs()) }},
	{'S', []string{"start", "starttime"}, "START_TIME", func(r *runner, a *latticev1.Allocation) string { return r.startText(a) }},
	{'e', []string{"end", "endtime"}, "END_TIME", func(r *runner, a *latticev1.Allocation) string { return r.tableTime(a.GetEndTimeUnixMs()) }},
	{'Q', []string{"priority", "priorityclass", "prio"}, "PRIO", func(_ *runner, a *latticev1.Allocation) string {
		return strconv.Itoa(int(a.GetRequest().GetPriorityClass()))
	}},
	{'X', []string{"exitcode", "exit"}, "EXIT", func(_ *runner, a *latticev1.Allocation) string { return exitText(a) }},
	{'g', []string{"project", "wckey"}, "PROJECT", func(_ *runner, a *latticev1.Allocation) string { return orDash(a.GetRequest().GetProject()) }},
	{'Z', []string{"workdir"}, "WORK_DIR", func(_ *runner, a *latticev1.Allocation) string { return orDash(a.GetRequest().GetWorkDir()) }},
	{'F', []string{"arrayjobid"}, "ARRAY_JOB_ID", func(_ *runner, a *latticev1.Allocation) string {
		if a.GetArrayJobId() == 0 {
			return "-"
		}
		return strconv.FormatUint(a.GetArrayJobId(), 10)
	}},
	{'K', []string{"arraytaskid"}, "ARRAY_TASK_ID", func(_ *runner, a *latticev1.Allocation) string {
		if a.GetArrayJobId() == 0 {
			return "-"
		}
		return strconv.Itoa(int(a.GetArrayIndex()))
	}},
	// Measured usage (usage_job.go): names only, no squeue letter.
	usageField("totalcpu", "TOTALCPU"), usageField("usercpu", "USERCPU"), usageField("systemcpu", "SYSTEMCPU"),
	usageField("maxrss", "MAXRSS"), usageField("consumedenergy", "CONSUMEDENERGY"),
}

func exitText(a *latticev1.Allocation) string {
	if !a.GetHasExitCode() {
		return "-"
	}
	return strconv.Itoa(int(a.GetExitCode()))
}

// startText is when a started, or for a pending allocation the expected
// start from its vCluster's backfill plan ("N/A" while there is none).
func (r *runner) startText(a *latticev1.Allocation) string {
	if ms := a.GetStartTimeUnixMs(); ms != 0 {
		return r.tableTime(ms)
	}
	if ms := a.GetExplanation().GetExpectedStartUnixMs(); ms != 0 && model.AllocState(a.GetState()) == model.StatePending {
		return r.tableTime(ms)
	}
	return "N/A"
}

// column is one column of a --format: a field, its header, and the
// width it is padded (positive: left-justified) or right-justified to
// (negative), 0 for the table's alignment.
type column struct {
	field  *allocField
	prefix string // literal text before it (squeue format)
	width  int
	right  bool
}

// parseFormat reads a --format: squeue's "%i %.9P %j %T %M %D %R" (with
// %[.][-][WIDTH]LETTER) or sacct's "JobID,JobName%20,State".
func parseFormat(s string) ([]column, error) {
	allowed := "squeue letters such as \"%i %j %u %T %M %D %R\" (" + letterList() + "), or names such as \"id,name,state,elapsed\" (" + nameList() + ")"
	if strings.TrimSpace(s) == "" {
		return nil, &model.FieldError{Field: "format", Value: s, Allowed: allowed}
	}
	var cols []column
	if strings.Contains(s, "%") && !strings.Contains(s, ",") {
		rest := s
		for rest != "" {
			i := strings.IndexByte(rest, '%')
			if i < 0 {
				return nil, &model.FieldError{Field: "format", Value: s, Allowed: allowed + "; text after the last field"}
			}
			prefix := strings.TrimSpace(rest[:i])
			rest = rest[i+1:]
			col := column{prefix: prefix}
			if strings.HasPrefix(rest, ".") {
				col.right, rest = true, rest[1:]
			}
			rest = strings.TrimPrefix(rest, "-")
			j := 0
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			if j > 0 {
				col.width, _ = strconv.Atoi(rest[:j])
			}
			rest = rest[j:]
			if rest == "" {
				return nil, &model.FieldError{Field: "format", Value: s, Allowed: allowed}
			}
			letter, size := rest[0], 1
			rest = rest[size:]
			for k := range allocFields {
				if allocFields[k].letter == letter {
					col.field = &allocFields[k]
				}
			}
			if col.field == nil {
				return nil, &model.FieldError{Field: "format", Value: "%" + string(letter), Allowed: allowed}
			}
			cols = append(cols, col)
		}
		return cols, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, width, hasWidth := strings.Cut(strings.TrimSpace(part), "%")
		name = strings.ToLower(strings.TrimSpace(name))
		col := column{}
		if hasWidth {
			w, err := strconv.Atoi(width)
			if err != nil || w <= 0 {
				return nil, &model.FieldError{Field: "format", Value: part, Allowed: "NAME or NAME%WIDTH with WIDTH >= 1"}
			}
			col.width = w
		}
		for k := range allocFields {
			if slices.Contains(allocFields[k].names, name) {
				col.field = &allocFields[k]
			}
		}
		if col.field == nil {
			var names []string
			for _, f := range allocFields {
				names = append(names, f.names...)
			}
			return nil, &model.FieldError{Field: "format", Value: strings.TrimSpace(part), Allowed: nameList() + didYouMean(suggest(name, names))}
		}
		cols = append(cols, col)
	}
	return cols, nil
}

func letterList() string {
	var parts []string
	for _, f := range allocFields {
		if f.letter != 0 {
			parts = append(parts, "%"+string(f.letter)+" "+f.names[0])
		}
	}
	return strings.Join(parts, ", ")
}

func nameList() string {
	var parts []string
	for _, f := range allocFields {
		parts = append(parts, f.names[0])
	}
	return strings.Join(parts, ", ")
}

// formatRows writes the header (unless the table's shape drops it) and
// one row per allocation in the columns of a --format.
func (r *runner) formatRows(w interface{ Write([]byte) (int, error) }, cols []column, allocs []*latticev1.Allocation) {
	cells := func(get func(c column) string) []any {
		out := make([]any, len(cols))
		for i, c := range cols {
			out[i] = fit(c, get(c))
		}
		return out
	}
	row(w, cells(func(c column) string { return c.prefix + c.field.header })...)
	for _, a := range allocs {
		row(w, cells(func(c column) string { return c.prefix + c.field.value(r, a) })...)
	}
}

// fit truncates and pads s to a column's width (squeue: a field longer
// than its width is cut; "." justifies right).
func fit(c column, s string) string {
	if c.width <= 0 {
		return s
	}
	if utf8.RuneCountInString(s) > c.width {
		s = string([]rune(s)[:c.width])
	}
	if c.right {
		return fmt.Sprintf("%*s", c.width, s)
	}
	return fmt.Sprintf("%-*s", c.width, s)
}
