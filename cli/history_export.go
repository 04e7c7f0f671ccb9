package cli

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

// `latticectl history --export csv|jsonl`: the ended allocations a history
// query selects, one per row or line, for site accounting tools. Both
// forms carry the same fields (exportColumns) under the same names; times
// are RFC 3339 in UTC (empty when absent), durations in seconds.

var exportColumns = []string{
	"id", "name", "user", "tenant", "project", "vcluster", "qos", "priority_class", "state", "reason", "exit_code",
	"submit", "eligible", "start", "end", "elapsed_seconds", "walltime_seconds", "nodes", "nodelist", "gpus_per_node",
	"requeue_count", "array_job_id", "array_index",
}

// exportRow is one allocation's values, in exportColumns' order.
func (r *runner) exportRow(a *latticev1.Allocation) []string {
	t := func(ms int64) string {
		if ms == 0 {
			return ""
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	exit := ""
	if a.GetHasExitCode() {
		exit = strconv.Itoa(int(a.GetExitCode()))
	}
	req := a.GetRequest()
	arrayJob, arrayIndex := "", ""
	if a.GetArrayJobId() != 0 {
		arrayJob, arrayIndex = strconv.FormatUint(a.GetArrayJobId(), 10), strconv.Itoa(int(a.GetArrayIndex()))
	}
	return []string{
		displayID(a), req.GetName(), userOf(a), req.GetTenant(), req.GetProject(), req.GetVcluster(), req.GetQos(),
		strconv.Itoa(int(req.GetPriorityClass())), a.GetState(), a.GetReason(), exit,
		t(a.GetSubmitTimeUnixMs()), t(a.GetEligibleTimeUnixMs()), t(a.GetStartTimeUnixMs()), t(a.GetEndTimeUnixMs()),
		strconv.FormatInt(int64(r.runDuration(a)/time.Second), 10), strconv.FormatInt(req.GetWalltimeSeconds(), 10),
		strconv.Itoa(nodeCount(a)), hostlist(a.GetNodes()), strconv.Itoa(int(req.GetGpusPerNode())),
		strconv.Itoa(int(a.GetRequeueCount())), arrayJob, arrayIndex,
	}
}

// exportHistory writes allocs as CSV (with a header line) or JSON lines.
func (r *runner) exportHistory(w io.Writer, format string, allocs []*latticev1.Allocation) error {
	switch strings.ToLower(format) {
	case "csv":
		cw := csv.NewWriter(w)
		if err := cw.Write(exportColumns); err != nil {
			return err
		}
		for _, a := range allocs {
			if err := cw.Write(r.exportRow(a)); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case "jsonl":
		enc := json.NewEncoder(w)
		for _, a := range allocs {
			row := r.exportRow(a)
			obj := make(map[string]any, len(row))
			for i, c := range exportColumns {
				obj[c] = jsonValue(c, row[i])
			}
			if err := enc.Encode(obj); err != nil {
				return err
			}
		}
		return nil
	default:
		return &model.FieldError{Field: "export", Value: format, Allowed: "csv or jsonl"}
	}
}

// jsonValue gives numbers as numbers and absent values as null in JSON lines.
func jsonValue(column, v string) any {
	if v == "" {
		return nil
	}
	switch column {
	case "exit_code", "priority_class", "elapsed_seconds", "walltime_seconds", "nodes", "gpus_per_node", "requeue_count", "array_index":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	case "array_job_id":
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
	}
	return v
}

// checkExport refuses an unknown --export form before anything is asked.
func checkExport(format string) error {
	switch strings.ToLower(format) {
	case "", "csv", "jsonl":
		return nil
	}
	return &model.FieldError{Field: "export", Value: format, Allowed: "csv or jsonl"}
}
