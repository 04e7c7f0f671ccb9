package model

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// QOS is one entry of the site's QOS table: a name users write
// (#SBATCH --qos=debug) and what it means here. The quorum holds the
// table; admins change it (`latticectl qos set`).
type QOS struct {
	Name string `json:"name"`
	// PriorityClass is the class a submission with this QOS gets (0..10).
	PriorityClass int `json:"priority_class"`
	// MaxWalltime and MaxNodes bound one job of this QOS; 0 = no limit.
	MaxWalltime time.Duration `json:"max_walltime,omitempty"`
	MaxNodes    int           `json:"max_nodes,omitempty"`
	// VCluster, when set, is where a job of this QOS runs unless it names one.
	VCluster    string `json:"vcluster,omitempty"`
	Description string `json:"description,omitempty"`
	// PreemptMode, when set, is what preemption does to this QOS's work in
	// place of its vCluster's mode (off: never preempted).
	PreemptMode PreemptMode `json:"preempt_mode,omitempty"`
}

// DefaultQOS is the table a new cluster starts with: the five names
// latticectl always knew, plus debug, which many centres' scripts use. None
// has limits: they are the site's to set.
func DefaultQOS() []QOS {
	return []QOS{
		{Name: "scavenger", PriorityClass: 0, Description: "runs only when nothing else wants the nodes"},
		{Name: "low", PriorityClass: 2},
		{Name: "normal", PriorityClass: 5, Description: "the default"},
		{Name: "high", PriorityClass: 8},
		{Name: "urgent", PriorityClass: 10},
		// Sites bound it (NERSC: 30 min; BSC: 2 h) with `latticectl qos set`.
		{Name: "debug", PriorityClass: 8, Description: "short test runs"},
	}
}

// Validate checks a QOS entry before it is proposed.
func (q *QOS) Validate() error { return q.ValidateLevel0() }

// ValidateLevel0 is Validate's rules of feature level 0.
// It is frozen: the Raft log's entries of feature level 0 are applied
// with exactly these rules (quorum Apply), on every member, forever.
// Tighten or loosen a rule in Validate instead, which is checked before a
// proposal (TestLevel0RulesAreFrozen pins this function's verdicts).
func (q *QOS) ValidateLevel0() error {
	if !validName(q.Name) || len(q.Name) > 64 {
		return fieldErr("qos", q.Name, "letters, digits, '.', '-' and '_' (up to 64)")
	}
	if q.PriorityClass < 0 || q.PriorityClass > MaxPriorityClass {
		return fieldErr("priority-class", itoa(q.PriorityClass), "an integer 0..10")
	}
	if q.MaxWalltime < 0 || q.MaxWalltime > MaxWalltime {
		return fieldErr("max-walltime", q.MaxWalltime.String(), "a duration >= 0 and at most 365 days (0 = no limit)")
	}
	if q.MaxNodes < 0 {
		return fieldErr("max-nodes", itoa(q.MaxNodes), "a node count >= 0 (0 = no limit)")
	}
	if q.VCluster != "" && !validName(q.VCluster) {
		return fieldErr("vcluster", q.VCluster, "letters, digits, '.', '-' and '_'")
	}
	if err := exactMode("preempt-mode", q.PreemptMode, PreemptModes); err != nil {
		return err
	}
	if len(q.Description) > 200 || strings.ContainsAny(q.Description, "\n\r\x00") {
		return fieldErr("description", q.Description, "up to 200 characters on one line")
	}
	return nil
}

// CheckRequest says whether r fits this QOS's limits.
func (q *QOS) CheckRequest(r *Request) error {
	if q.MaxWalltime > 0 && r.Walltime > q.MaxWalltime {
		return fieldErr("walltime", FormatWalltime(r.Walltime), fmt.Sprintf("at most %s in qos %s", FormatWalltime(q.MaxWalltime), q.Name))
	}
	if q.MaxNodes > 0 && r.NodesMin > q.MaxNodes {
		return fieldErr("nodes", itoa(r.NodesMin), fmt.Sprintf("at most %d in qos %s", q.MaxNodes, q.Name))
	}
	return nil
}

// ValidatePartition checks a partition name (an alias of a vCluster).
func ValidatePartition(name string) error {
	if !validName(name) || len(name) > 64 {
		return fieldErr("partition", name, "letters, digits, '.', '-' and '_' (up to 64)")
	}
	return nil
}

// Hold kinds: who put an allocation on hold.
const (
	HoldUser  = "user"
	HoldAdmin = "admin"
)

// Reasons of pending work that is not yet eligible by the user's or an admin's wish.
const (
	ReasonBeginTime    = "BeginTime"
	ReasonJobHeldUser  = "JobHeldUser"
	ReasonJobHeldAdmin = "JobHeldAdmin"
)

// HoldReason is the pending reason of a hold kind.
func HoldReason(kind string) string {
	if kind == HoldAdmin {
		return ReasonJobHeldAdmin
	}
	return ReasonJobHeldUser
}

// Waiting says why a pending allocation may not start at t regardless of
// the nodes: held, or before its begin time; "" when it may.
func (a *Allocation) Waiting(t time.Time) string {
	switch {
	case a.Held != "":
		return HoldReason(a.Held)
	case !a.BeginTime.IsZero() && t.Before(a.BeginTime):
		return ReasonBeginTime
	}
	return ""
}

// NodeAllowed reports whether the request may run on node name: in its
// node list when it has one, and not in its exclusions.
func (r *Request) NodeAllowed(name string) bool {
	if len(r.NodeList) > 0 && !slices.Contains(r.NodeList, name) {
		return false
	}
	return !slices.Contains(r.ExcludeNodes, name)
}

const hostlistAllowed = "node names or Slurm hostlists such as node[001-004,007],gpu01"

// MaxHostlistNodes bounds how many names one hostlist may expand to.
const MaxHostlistNodes = 100000

// ExpandHostlist expands a Slurm hostlist expression: "n[001-003,007],gpu1"
// is n001 n002 n003 n007 gpu1. Zero padding follows the range's first
// number. The result is sorted and unique.
func ExpandHostlist(s string) ([]string, error) {
	bad := func() error { return fieldErr("nodelist", s, hostlistAllowed) }
	var out []string
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); {
		// One item: up to a comma outside brackets.
		j, depth := i, 0
		for ; j < len(s); j++ {
			if s[j] == '[' {
				depth++
			} else if s[j] == ']' {
				depth--
			} else if s[j] == ',' && depth == 0 {
				break
			}
		}
		item := strings.TrimSpace(s[i:j])
		i = j + 1
		if item == "" {
			return nil, bad()
		}
		names, err := expandItem(item)
		if err != nil {
			return nil, bad()
		}
		out = append(out, names...)
		if len(out) > MaxHostlistNodes {
			return nil, fieldErr("nodelist", s, fmt.Sprintf("at most %d nodes", MaxHostlistNodes))
		}
	}
	if len(out) == 0 {
		return nil, bad()
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if !validName(item) {
			return nil, fmt.Errorf("bad name")
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("unclosed [")
	}
	end += open
	prefix, body, suffix := item[:open], item[open+1:end], item[end+1:]
	rests, err := []string{""}, error(nil)
	if suffix != "" {
		if rests, err = expandItem(suffix); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if lo == "" || err1 != nil || err2 != nil || a < 0 || b < a || b-a > MaxHostlistNodes {
			return nil, fmt.Errorf("bad range")
		}
		for n := a; n <= b; n++ {
			num := strconv.Itoa(n)
			if len(num) < len(lo) {
				num = strings.Repeat("0", len(lo)-len(num)) + num
			}
			if len(out)+len(rests) > MaxHostlistNodes {
				return nil, fmt.Errorf("too many names")
			}
			for _, r := range rests {
				name := prefix + num + r
				if !validName(name) {
					return nil, fmt.Errorf("bad name")
				}
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// SlurmTimeUnit is the unit word of Slurm's relative times (now+5minutes,
// now-2days): seconds when empty; false for a word Slurm does not take.
// sbatch --begin and sacct --starttime/--endtime share it.
func SlurmTimeUnit(word string) (time.Duration, bool) {
	switch word {
	case "", "s", "sec", "secs", "second", "seconds":
		return time.Second, true
	case "m", "min", "mins", "minute", "minutes":
		return time.Minute, true
	case "h", "hour", "hours":
		return time.Hour, true
	case "d", "day", "days":
		return 24 * time.Hour, true
	case "w", "week", "weeks":
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

const beginAllowed = "now+N[seconds|minutes|hours|days|weeks], HH:MM[:SS] [AM|PM], YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], " +
	"midnight, noon, elevenses, fika, teatime, today, tomorrow"

// ParseBeginTime reads sbatch's --begin forms relative to now (in now's
// location): now+1hour, now+60 (seconds), 16:00, 2026-11-24T08:00,
// midnight, noon, teatime (16:00), today, tomorrow. A bare time of day
// already past today means tomorrow, as in Slurm.
func ParseBeginTime(s string, now time.Time) (time.Time, error) {
	bad := fieldErr("begin", s, beginAllowed)
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "" {
		return time.Time{}, bad
	}
	loc := now.Location()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	atOrTomorrow := func(h, m, sec int) time.Time {
		t := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
		if !t.After(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t
	}
	if strings.HasPrefix(v, "now") {
		v = strings.ReplaceAll(v, " ", "") // Slurm takes "now + 5"
	}
	if rest, ok := strings.CutPrefix(v, "now"); ok {
		if rest == "" {
			return now, nil
		}
		if rest[0] != '+' {
			return time.Time{}, bad
		}
		rest = rest[1:]
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n < 0 || n > 10*366*24*3600 {
			return time.Time{}, bad
		}
		unit, ok := SlurmTimeUnit(rest[i:])
		if !ok {
			return time.Time{}, bad
		}
		return now.Add(time.Duration(n) * unit), nil
	}
	switch v {
	case "today":
		return day, nil
	case "tomorrow":
		return day.AddDate(0, 0, 1), nil
	case "midnight":
		return day.AddDate(0, 0, 1), nil
	case "noon":
		return atOrTomorrow(12, 0, 0), nil
	case "elevenses":
		return atOrTomorrow(11, 0, 0), nil
	case "fika":
		return atOrTomorrow(15, 0, 0), nil
	case "teatime":
		return atOrTomorrow(16, 0, 0), nil
	}
	// YYYY-MM-DD[THH:MM[:SS]]
	for _, layout := range []string{"2006-01-02t15:04:05", "2006-01-02t15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	// MM/DD[/YY]
	for _, layout := range []string{"01/02/06", "1/2/06", "01/02", "1/2"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			if !strings.Contains(layout, "06") {
				t = time.Date(now.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
				if t.Before(day) {
					t = t.AddDate(1, 0, 0)
				}
			}
			return t, nil
		}
	}
	// HH:MM[:SS] [AM|PM]
	clock, ampm := v, ""
	for _, suf := range []string{"am", "pm"} {
		if c, ok := strings.CutSuffix(v, suf); ok {
			clock, ampm = strings.TrimSpace(c), suf
		}
	}
	parts := strings.Split(clock, ":")
	if len(parts) == 2 || len(parts) == 3 {
		var hms [3]int
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 || len(p) > 2 {
				return time.Time{}, bad
			}
			hms[i] = n
		}
		if ampm != "" {
			if hms[0] < 1 || hms[0] > 12 {
				return time.Time{}, bad
			}
			hms[0] %= 12
			if ampm == "pm" {
				hms[0] += 12
			}
		}
		if hms[0] > 23 || hms[1] > 59 || hms[2] > 59 {
			return time.Time{}, bad
		}
		return atOrTomorrow(hms[0], hms[1], hms[2]), nil
	}
	return time.Time{}, bad
}

// MailTypes are sbatch's --mail-type values.
var MailTypes = []string{"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
	"TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS"}

// ParseMailType checks sbatch's --mail-type=TYPE[,TYPE...] and returns it upper-cased.
func ParseMailType(s string) (string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		u := strings.ToUpper(strings.TrimSpace(p))
		if !slices.Contains(MailTypes, u) {
			return "", fieldErr("mail-type", s, strings.Join(MailTypes, ", "))
		}
		out = append(out, u)
	}
	return strings.Join(out, ","), nil
}
