package agent

import (
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

// A final report says when its run ended, and keeps saying it after the
// agent's state file round trip (a report resent after a restart).
func TestFinalReportCarriesEndTime(t *testing.T) {
	end := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	r := exitReport(Exit{AllocID: 7, State: model.StateCompleted, End: end})
	if r.EndUnixMs != end.UnixMilli() {
		t.Fatalf("end_unix_ms %d, want %d", r.EndUnixMs, end.UnixMilli())
	}
	if again := finalOf(r).report(7); again.EndUnixMs != r.EndUnixMs {
		t.Errorf("after the state file: %d", again.EndUnixMs)
	}
	if c := cloneReport(r); c.EndUnixMs != r.EndUnixMs {
		t.Errorf("clone: %d", c.EndUnixMs)
	}
	if r := exitReport(Exit{AllocID: 8, State: model.StateFailed}); r.EndUnixMs != 0 {
		t.Errorf("unknown end sent as %d", r.EndUnixMs)
	}
}
