package replay

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// SWF field numbers (1-based, as the Standard Workload Format defines them).
const (
	swfJobNumber = 1
	swfSubmit    = 2
	swfRunTime   = 4
	swfAllocated = 5
	swfRequested = 8
	swfReqTime   = 9
	swfUser      = 12
	swfFields    = 18
)

var swfFieldNames = [swfFields + 1]string{
	1: "job number", 2: "submit time", 3: "wait time", 4: "run time", 5: "allocated processors",
	6: "average CPU time", 7: "used memory", 8: "requested processors", 9: "requested time",
	10: "requested memory", 11: "status", 12: "user id", 13: "group id", 14: "executable",
	15: "queue", 16: "partition", 17: "preceding job", 18: "think time",
}

// SyntaxError is a malformed line of a trace.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ReadSWF reads a trace in the Standard Workload Format with the replay's job
// model: size = requested processors (field 8) if > 0, else allocated
// processors (field 5), size <= 0 dropped; runtime = field 4, < 0 dropped;
// estimate = requested time (field 9) if > 0, else the runtime, and never
// below the runtime; capacity = the MaxProcs header, else MaxNodes, else the
// largest job; jobs larger than the capacity dropped; tenant = user id
// (field 12). Fields may be written as decimals.
func ReadSWF(r io.Reader, opt ReadOptions) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	tr := &Trace{}
	var maxProcs, maxNodes int
	var vals [swfFields + 1]float64
	userNames := map[int64]string{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if text[0] == ';' {
			if v, ok := swfHeader(text, "MaxProcs"); ok {
				maxProcs = v
			} else if v, ok := swfHeader(text, "MaxNodes"); ok {
				maxNodes = v
			}
			continue
		}
		if err := parseSWFLine(text, line, &vals); err != nil {
			if opt.Lenient {
				tr.Skipped++
				continue
			}
			return nil, err
		}
		size := int(math.Round(vals[swfRequested]))
		if size <= 0 {
			size = int(math.Round(vals[swfAllocated]))
		}
		run := vals[swfRunTime]
		if size <= 0 || run < 0 {
			tr.Dropped++
			continue
		}
		runtime := seconds(run)
		estimate := runtime
		if req := vals[swfReqTime]; req > 0 {
			estimate = max(seconds(req), runtime)
		}
		user := int64(vals[swfUser])
		tenant, ok := userNames[user]
		if !ok {
			if user < 0 {
				tenant = "unknown"
			} else {
				tenant = "u" + strconv.FormatInt(user, 10)
			}
			userNames[user] = tenant
		}
		tr.Jobs = append(tr.Jobs, Job{
			ID:       uint64(vals[swfJobNumber]),
			Submit:   seconds(vals[swfSubmit]),
			Runtime:  runtime,
			Estimate: estimate,
			Size:     size,
			Tenant:   tenant,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	switch {
	case maxProcs > 0:
		tr.Capacity = maxProcs
	case maxNodes > 0:
		tr.Capacity = maxNodes
	default:
		for _, j := range tr.Jobs {
			tr.Capacity = max(tr.Capacity, j.Size)
		}
	}
	kept := tr.Jobs[:0]
	for _, j := range tr.Jobs {
		if j.Size > tr.Capacity {
			tr.Dropped++
			continue
		}
		kept = append(kept, j)
	}
	tr.Jobs = kept
	sortJobs(tr.Jobs)
	return tr, nil
}

// swfHeader reads "; Key: N" and reports N when the key matches.
func swfHeader(text, key string) (int, bool) {
	rest := strings.TrimSpace(strings.TrimPrefix(text, ";"))
	k, v, ok := strings.Cut(rest, ":")
	if !ok || !strings.EqualFold(strings.TrimSpace(k), key) {
		return 0, false
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return int(n), true
}

func parseSWFLine(text string, line int, vals *[swfFields + 1]float64) error {
	n := 0
	for f := range strings.FieldsSeq(text) {
		n++
		if n > swfFields {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return &SyntaxError{Line: line, Msg: fmt.Sprintf("field %d (%s) is %q, want a number", n, swfFieldNames[n], f)}
		}
		vals[n] = v
	}
	if n != swfFields {
		return &SyntaxError{Line: line, Msg: fmt.Sprintf("%d fields, want %d (SWF job line)", n, swfFields)}
	}
	return nil
}

// seconds converts trace seconds (possibly fractional) to a duration.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}
