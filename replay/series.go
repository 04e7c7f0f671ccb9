package replay

import "time"

// Series is a replay's state over virtual time, for the plots: one sample
// per decision time (queue length and busy nodes right after it), and each
// job's eligible time and wait.
type Series struct {
	Capacity int
	// T in seconds since the trace's epoch; Queue and Busy after the events
	// at T.
	T     []float64
	Queue []int32
	Busy  []int32
	// JobSubmit and JobWait in seconds, in trace order.
	JobSubmit []float64
	JobWait   []float64
}

func (s *Series) add(t time.Duration, queued, busy int) {
	ts := t.Seconds()
	if n := len(s.T); n > 0 && s.T[n-1] == ts {
		s.Queue[n-1], s.Busy[n-1] = int32(queued), int32(busy)
		return
	}
	s.T = append(s.T, ts)
	s.Queue = append(s.Queue, int32(queued))
	s.Busy = append(s.Busy, int32(busy))
}

// jobs records each job's eligible time and wait once the replay is over.
func (s *Series) jobs(runs []jobRun) {
	s.JobSubmit = make([]float64, len(runs))
	s.JobWait = make([]float64, len(runs))
	for i := range runs {
		s.JobSubmit[i] = runs[i].eligible.Seconds()
		s.JobWait[i] = (runs[i].start - runs[i].eligible).Seconds()
	}
}
