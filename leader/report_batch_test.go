package leader

import (
	"context"
	"testing"
	"time"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// A trivial job's start and end reports come a few milliseconds apart (the
// supervisor's start-up and `true`); they must share one batch, and so one
// Raft entry, rather than cost a bolt commit on every member each. With
// the 2 ms batch of before, a report 5 ms after the first went into a
// batch of its own.
func TestStartAndEndReportsShareABatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	report := func(id uint64, st string) reportIn {
		return reportIn{report: &latticev1.AllocationReport{AllocationId: id, State: st}}
	}
	merged := false
	for try := 0; try < 3 && !merged; try++ { // a stalled test goroutine may miss the window; not three times
		in := make(chan reportIn, 8)
		got := make(chan []reportIn, 1)
		go func() { got <- collectReports(ctx, in, reportBatchWait, maxReportBatch) }()
		in <- report(1, "RUNNING")
		time.Sleep(5 * time.Millisecond)
		in <- report(1, "COMPLETED")
		b := <-got
		merged = len(b) == 2
		if len(b) == 0 || b[0].report.State != "RUNNING" {
			t.Fatalf("batch %v: the first report is missing or out of order", b)
		}
	}
	if !merged {
		t.Fatalf("a job's end 5 ms after its start went into another batch (reportBatchWait %v)", reportBatchWait)
	}
}

func TestCollectReportsBounds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan reportIn, 8)
	for i := range 5 {
		in <- reportIn{report: &latticev1.AllocationReport{AllocationId: uint64(i)}}
	}
	if b := collectReports(ctx, in, time.Hour, 3); len(b) != 3 {
		t.Fatalf("a full batch closes at its size: got %d reports, want 3", len(b))
	}
	if b := collectReports(ctx, in, time.Millisecond, 10); len(b) != 2 {
		t.Fatalf("the rest after the wait: got %d, want 2", len(b))
	}
	cancel()
	if b := collectReports(ctx, in, time.Millisecond, 10); b != nil {
		t.Fatalf("after the end: got %v, want nil", b)
	}
}
