package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// Slurm's names for what Lattice knows about jobs: states, reasons, times.

// slurmState is Slurm's long job state (squeue %T, sacct State, scontrol
// JobState). Lattice's STAGING is Slurm's CONFIGURING; CHECKPOINTING is
// still RUNNING (the job runs while it writes its checkpoint).
func slurmState(a *latticev1.Allocation) string {
	switch model.AllocState(a.GetState()) {
	case model.StatePending:
		return "PENDING"
	case model.StateStaging:
		return "CONFIGURING"
	case model.StateRunning, model.StateCheckpointing:
		if a.GetSuspendedUnixMs() != 0 {
			return "SUSPENDED" // by an admin (latticectl suspend, scontrol suspend)
		}
		return "RUNNING"
	case model.StateSuspended:
		return "SUSPENDED"
	case model.StateCompleted:
		return "COMPLETED"
	case model.StateCancelled:
		return "CANCELLED"
	case model.StateFailed:
		switch a.GetReason() {
		case model.ReasonWalltimeExceeded:
			return "TIMEOUT"
		case model.ReasonNodeFailure:
			return "NODE_FAIL"
		case model.ReasonPreempted:
			return "PREEMPTED"
		case "OutOfMemory":
			return "OUT_OF_MEMORY"
		}
		return "FAILED"
	}
	return strings.ToUpper(a.GetState())
}

// slurmShortState is squeue's %t.
func slurmShortState(a *latticev1.Allocation) string {
	switch slurmState(a) {
	case "PENDING":
		return "PD"
	case "CONFIGURING":
		return "CF"
	case "RUNNING":
		return "R"
	case "SUSPENDED":
		return "S"
	case "COMPLETED":
		return "CD"
	case "CANCELLED":
		return "CA"
	case "TIMEOUT":
		return "TO"
	case "NODE_FAIL":
		return "NF"
	case "PREEMPTED":
		return "PR"
	case "OUT_OF_MEMORY":
		return "OOM"
	}
	return "F"
}

// slurmStateWords maps every state word squeue -t, sacct -s and scancel
// -t accept to the long names it stands for.
var slurmStateWords = map[string][]string{
	"PD": {"PENDING"}, "PENDING": {"PENDING"}, "R": {"RUNNING"}, "RUNNING": {"RUNNING"},
	"S": {"SUSPENDED"}, "SUSPENDED": {"SUSPENDED"}, "CD": {"COMPLETED"}, "COMPLETED": {"COMPLETED"},
	"CA": {"CANCELLED"}, "CANCELLED": {"CANCELLED"}, "F": {"FAILED"}, "FAILED": {"FAILED"},
	"TO": {"TIMEOUT"}, "TIMEOUT": {"TIMEOUT"}, "NF": {"NODE_FAIL"}, "NODE_FAIL": {"NODE_FAIL"},
	"PR": {"PREEMPTED"}, "PREEMPTED": {"PREEMPTED"}, "OOM": {"OUT_OF_MEMORY"}, "OUT_OF_MEMORY": {"OUT_OF_MEMORY"},
	"CF": {"CONFIGURING"}, "CONFIGURING": {"CONFIGURING"},
	// Lattice has no job in these states; they are accepted and match nothing.
	"CG": {}, "COMPLETING": {}, "BF": {}, "BOOT_FAIL": {}, "DL": {}, "DEADLINE": {}, "RQ": {}, "REQUEUED": {},
	"RS": {}, "RESIZING": {}, "RV": {}, "REVOKED": {}, "SE": {}, "SPECIAL_EXIT": {}, "ST": {}, "STOPPED": {},
	"RD": {}, "RESV_DEL_HOLD": {}, "RF": {}, "REQUEUE_FED": {}, "RH": {}, "REQUEUE_HOLD": {}, "SI": {}, "SIGNALING": {},
	"SO": {}, "STAGE_OUT": {},
	"ALL": {"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"},
}

// parseSlurmStates reads a state list (-t/-s): the long names it selects.
func parseSlurmStates(field, s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, w := range splitList(s) {
		names, ok := slurmStateWords[strings.ToUpper(w)]
		if !ok {
			return nil, fmt.Errorf("Invalid job state specified: %s\n%s: error: Valid job states include: "+
				"PENDING,RUNNING,SUSPENDED,COMPLETED,CANCELLED,FAILED,TIMEOUT,NODE_FAIL,PREEMPTED,BOOT_FAIL,DEADLINE,OUT_OF_MEMORY,"+
				"COMPLETING,CONFIGURING,RESIZING,RESV_DEL_HOLD,REQUEUED,REQUEUE_FED,REQUEUE_HOLD,REVOKED,SIGNALING,SPECIAL_EXIT,STAGE_OUT,STOPPED\n", w, field)
		}
		for _, n := range names {
			out[n] = true
		}
	}
	return out, nil
}

// slurmActive are the states squeue lists without -t.
var slurmActive = map[string]bool{"PENDING": true, "CONFIGURING": true, "RUNNING": true, "SUSPENDED": true}

// slurmReason is Slurm's name of a's reason (squeue %r, scontrol
// Reason=). Lattice's own reasons without a Slurm twin keep their names.
func slurmReason(a *latticev1.Allocation) string {
	r := a.GetReason()
	switch model.AllocState(a.GetState()) {
	case model.StatePending:
		switch r {
		case "", model.ReasonWaitingForScheduling:
			return "None"
		case model.ReasonQuotaMaxNodes:
			return "AssocGrpNodeLimit"
		case model.ReasonQuotaMaxRunning:
			return "AssocMaxJobsLimit"
		case model.ReasonNodesDrained:
			return "ReqNodeNotAvail"
		case model.ReasonMaintenance:
			return "ReqNodeNotAvail, Reserved for maintenance"
		case model.ReasonReserved:
			return "ReqNodeNotAvail, May be reserved for other job"
		case model.ReasonRequeued:
			return "BeginTime"
		}
		return r
	case model.StateFailed:
		switch r {
		case model.ReasonNonZeroExit:
			return "NonZeroExitCode"
		case model.ReasonWalltimeExceeded:
			return "TimeLimit"
		case model.ReasonNodeFailure:
			return "NodeDown"
		case model.ReasonLaunchFailed:
			return "JobLaunchFailure"
		case model.ReasonPreempted:
			return "None"
		}
		return cmp.Or(r, "None")
	}
	return "None"
}

// slurmSecs is squeue's elapsed form: M:SS, H:MM:SS, D-HH:MM:SS.
func slurmSecs(s int64) string { return elapsed(time.Duration(s) * time.Second) }

// slurmClock is sacct's and scontrol's: HH:MM:SS or D-HH:MM:SS.
func slurmClock(s int64) string {
	if s < 0 {
		s = 0
	}
	days, h, m, sec := s/86400, s%86400/3600, s%3600/60, s%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}

// slurmDate is Slurm's time stamp (local time, seconds), none when ms is 0.
func (r *runner) slurmDate(ms int64, none string) string {
	if ms == 0 {
		return none
	}
	return time.UnixMilli(ms).In(r.Location).Format("2006-01-02T15:04:05")
}

// slurmUser is who submitted a.
func slurmUser(a *latticev1.Allocation) string { return userOf(a) }

// slurmExit is Slurm's EXIT:SIGNAL form.
func slurmExit(a *latticev1.Allocation) string {
	if !a.GetHasExitCode() {
		return "0:0"
	}
	e := a.GetExitCode()
	if e > 128 && e < 160 { // the shell's 128+N: killed by signal N
		return fmt.Sprintf("0:%d", e-128)
	}
	return fmt.Sprintf("%d:0", e)
}

// jobRow is one line of squeue or sacct: an allocation, or the pending
// tasks of an array collapsed onto one line (tasks lists their indexes).
type jobRow struct {
	a     *latticev1.Allocation
	tasks []int32 // collapsed pending array tasks; nil otherwise
}

// id is the row's job id as Slurm prints it: 12, 12_3, or 12_[3-9].
func (j jobRow) id() string {
	if j.tasks != nil {
		return fmt.Sprintf("%d_[%s]", j.a.GetArrayJobId(), indexRanges(j.tasks))
	}
	return displayID(j.a)
}

// taskID is the array task id column: 3, or 3-9 for collapsed tasks, N/A
// outside arrays.
func (j jobRow) taskID() string {
	switch {
	case j.tasks != nil:
		return indexRanges(j.tasks)
	case j.a.GetArrayJobId() != 0:
		return strconv.Itoa(int(j.a.GetArrayIndex()))
	}
	return "N/A"
}

// arrayJobID is the array's id, or the job's own outside arrays.
func (j jobRow) arrayJobID() string {
	if aj := j.a.GetArrayJobId(); aj != 0 {
		return strconv.FormatUint(aj, 10)
	}
	return strconv.FormatUint(j.a.GetId(), 10)
}

// indexRanges writes sorted indexes as Slurm's ranges: 1-3,7,9-10.
func indexRanges(idx []int32) string {
	s := slices.Clone(idx)
	slices.Sort(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", s[i], s[j])
		} else {
			fmt.Fprintf(&b, "%d", s[i])
		}
		i = j + 1
	}
	return b.String()
}

// collapseArrays puts the pending tasks of each array, waiting for the
// same reason, on one row (squeue without -r), where the array's first
// such task was: 12_[3-9], and 12_[9] for the last one left (Slurm's
// array record keeps its brackets until its last task starts).
func collapseArrays(allocs []*latticev1.Allocation) []jobRow {
	var rows []jobRow
	at := map[string]int{}
	for _, a := range allocs {
		if a.GetArrayJobId() == 0 || model.AllocState(a.GetState()) != model.StatePending {
			rows = append(rows, jobRow{a: a})
			continue
		}
		key := fmt.Sprintf("%d/%s", a.GetArrayJobId(), a.GetReason())
		if i, ok := at[key]; ok {
			rows[i].tasks = append(rows[i].tasks, a.GetArrayIndex())
			continue
		}
		at[key] = len(rows)
		rows = append(rows, jobRow{a: a, tasks: []int32{a.GetArrayIndex()}})
	}
	return rows
}

// allocNodes is the nodes an allocation holds, or, while a preemption has
// it suspended (SUSPENDED, preempt-mode suspend), the nodes its frozen
// processes wait on — Slurm's squeue shows a suspended job's nodes.
func allocNodes(a *latticev1.Allocation) []string {
	if n := a.GetNodes(); len(n) > 0 {
		return n
	}
	return a.GetSuspendedOn()
}
