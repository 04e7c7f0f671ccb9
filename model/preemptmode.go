package model

// PreemptMode is what a vCluster (or a QOS) lets higher-class work do to
// running work of a lower class — Slurm's PreemptMode. Work that can
// checkpoint is always checkpointed and requeued, whatever the mode other
// than off; the mode says what happens to work that cannot.
type PreemptMode string

// Preemption modes.
const (
	// PreemptOff: never preempted.
	PreemptOff PreemptMode = "off"
	// PreemptCheckpoint: only work that can checkpoint is preempted (it
	// checkpoints, stops and is requeued); other work is never preempted.
	// The default: like a Slurm site, Lattice kills nothing for
	// higher-class work unless the site says so.
	PreemptCheckpoint PreemptMode = "checkpoint"
	// PreemptRequeue: work that cannot checkpoint is stopped and requeued
	// (it starts again from the beginning).
	PreemptRequeue PreemptMode = "requeue"
	// PreemptCancel: work that cannot checkpoint is cancelled (CANCELLED,
	// reason Preempted).
	PreemptCancel PreemptMode = "cancel"
	// PreemptSuspend: work that cannot checkpoint is suspended — its
	// processes frozen, its memory kept — while the preemptor runs on its
	// nodes, and resumed on the same nodes once the preemptor has ended
	// (Slurm's PreemptMode=SUSPEND, without time-slicing).
	PreemptSuspend PreemptMode = "suspend"
)

// DefaultPreemptMode is the mode of a vCluster that allows preemption and
// names none.
const DefaultPreemptMode = PreemptCheckpoint

// PreemptModes lists the modes.
var PreemptModes = []PreemptMode{PreemptOff, PreemptCheckpoint, PreemptRequeue, PreemptCancel, PreemptSuspend}

// ParsePreemptMode accepts a known mode in any letter case.
func ParsePreemptMode(s string) (PreemptMode, error) {
	return parseMode("preempt-mode", s, PreemptModes)
}

// EffectivePreemptMode is the vCluster's mode: off when it does not
// preempt (Preempts), else PreemptMode with its default.
func (v *VCluster) EffectivePreemptMode() PreemptMode {
	switch {
	case !v.Preempts():
		return PreemptOff
	case v.PreemptMode == "":
		return DefaultPreemptMode
	}
	return v.PreemptMode
}

// PreemptAction is what preempting one running allocation does to it.
type PreemptAction string

// Preemption actions. The empty action is "not preempted".
const (
	ActionCheckpoint PreemptAction = "checkpoint" // checkpoint, stop, requeue
	ActionRequeue    PreemptAction = "requeue"    // stop, requeue (its progress is lost)
	ActionCancel     PreemptAction = "cancel"     // cancelled
	ActionSuspend    PreemptAction = "suspend"    // frozen on its nodes until the preemptor ends
)

// VictimAction decides what preempting running allocation a means in
// vCluster vc, whose QOS entry is q (nil: none, or not in the table): the
// action, or "" and the reason it may not be preempted. The QOS's mode,
// when it has one, stands for the vCluster's (Slurm: the preemptee's QOS
// PreemptMode), but a vCluster whose preemption is off preempts nothing.
func VictimAction(vc *VCluster, q *QOS, a *Allocation) (PreemptAction, string) {
	mode := vc.EffectivePreemptMode()
	if mode == PreemptOff {
		return "", "preemption is off in vcluster " + vc.Name
	}
	if a.PriorityClass >= MaxPriorityClass {
		return "", "priority class 10 is never preempted"
	}
	if q != nil && q.PreemptMode != "" {
		mode = q.PreemptMode
		if mode == PreemptOff {
			return "", "qos " + q.Name + " has preempt-mode off"
		}
	}
	if a.Checkpoint.Checkpointable() {
		return ActionCheckpoint, ""
	}
	switch mode {
	case PreemptRequeue:
		return ActionRequeue, ""
	case PreemptCancel:
		return ActionCancel, ""
	case PreemptSuspend:
		return ActionSuspend, ""
	}
	who := "vcluster " + vc.Name
	if q != nil && q.PreemptMode != "" {
		who = "qos " + q.Name
	}
	return "", "it cannot checkpoint and " + who + " has preempt-mode " + string(mode)
}

// GangSuspended reports whether a was suspended for higher-class work
// (PreemptSuspend): SUSPENDED, its processes frozen on SuspendedOn.
func (a *Allocation) GangSuspended() bool {
	return a.State == StateSuspended && len(a.SuspendedOn) > 0
}
