package model

// BacklogPressure is the cost function's f6: min(1, queued / running)
// node-hours; 1 when nothing runs and work is queued, 0 when nothing is
// queued (or an input is negative or NaN). The solver scores with it and
// the checkpoint broker weighs backlog relief with it.
func BacklogPressure(queuedNodeHours, runningNodeHours float64) float64 {
	if !(queuedNodeHours > 0) {
		return 0
	}
	if !(runningNodeHours > 0) {
		return 1
	}
	switch r := queuedNodeHours / runningNodeHours; {
	case r > 1:
		return 1
	case r >= 0:
		return r
	default: // NaN (both infinite)
		return 0
	}
}
