package cli

import (
	"testing"
	"time"
)

// FuzzListingInputs: --format, --state and sacct times either parse or
// fail with a field error; they never panic.
func FuzzListingInputs(f *testing.F) {
	f.Add("%.8i %-12j %u %t %M %D %R", "R,PD,TO", "now-1hour")
	f.Add("JobID,JobName%20,State", "timeout,cg", "02/28-23:59")
	f.Add("%", "", "2026-02-30T25:61")
	f.Add("%9", ",,", "now+99999999999999999999weeks")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, format, states, when string) {
		_, _ = parseFormat(format)
		_, _ = parseStateFilters(states)
		_, _ = parseSlurmTime("starttime", when, now, time.UTC)
		_ = suggest(format, []string{"status", "history"})
		_ = splitJoined(nil, format)
	})
}
