package model

import "testing"

// TestVictimAction: the policy decision, Slurm's PreemptMode per vCluster
// with the victim's QOS standing for it when it sets one.
func TestVictimAction(t *testing.T) {
	const (
		ck = CheckpointSignal
		no = CheckpointNone
	)
	tests := []struct {
		name       string
		preemption bool
		vcMode     PreemptMode
		qosMode    PreemptMode // "" = the victim's QOS sets none
		checkpoint CheckpointMode
		class      int
		want       PreemptAction
	}{
		{"default: checkpointable work is checkpointed", true, "", "", ck, 2, ActionCheckpoint},
		{"default: work that cannot checkpoint is never preempted", true, "", "", no, 2, ""},
		{"mode checkpoint, said", true, PreemptCheckpoint, "", no, 2, ""},
		{"mode requeue", true, PreemptRequeue, "", no, 2, ActionRequeue},
		{"mode requeue still checkpoints what can", true, PreemptRequeue, "", ck, 2, ActionCheckpoint},
		{"mode cancel", true, PreemptCancel, "", no, 2, ActionCancel},
		{"mode suspend", true, PreemptSuspend, "", no, 2, ActionSuspend},
		{"mode suspend still checkpoints what can", true, PreemptSuspend, "", ck, 2, ActionCheckpoint},
		{"mode off", true, PreemptOff, "", ck, 2, ""},
		{"preemption off wins over the mode", false, PreemptRequeue, "", no, 2, ""},
		{"preemption off wins over the QOS", false, "", PreemptRequeue, ck, 2, ""},
		{"class 10 never", true, PreemptRequeue, PreemptRequeue, ck, MaxPriorityClass, ""},
		{"the QOS's mode stands for the vCluster's", true, PreemptCheckpoint, PreemptSuspend, no, 2, ActionSuspend},
		{"a QOS with mode off is never preempted", true, PreemptRequeue, PreemptOff, ck, 2, ""},
		{"a QOS with mode checkpoint protects what cannot", true, PreemptCancel, PreemptCheckpoint, no, 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vc := &VCluster{Name: "batch", Type: TypeHPCBatch, Preemption: tc.preemption, PreemptMode: tc.vcMode}
			var q *QOS
			if tc.qosMode != "" {
				q = &QOS{Name: "low", PriorityClass: 2, PreemptMode: tc.qosMode}
			}
			a := &Allocation{ID: 7, Request: Request{PriorityClass: tc.class, Checkpoint: tc.checkpoint}}
			got, why := VictimAction(vc, q, a)
			if got != tc.want {
				t.Fatalf("action %q (%s), want %q", got, why, tc.want)
			}
			if (got == "") != (why != "") {
				t.Fatalf("action %q with reason %q: a refusal, and only one, says why", got, why)
			}
		})
	}
}

func TestPreemptModeParseAndValidate(t *testing.T) {
	for _, s := range []string{"off", "Checkpoint", " requeue", "CANCEL", "suspend"} {
		if _, err := ParsePreemptMode(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParsePreemptMode("gang"); err == nil || err.Error() == "" {
		t.Error("gang accepted")
	}
	vc := VCluster{Name: "b", Type: TypeHPCBatch, PreemptMode: "kill"}
	if err := vc.Validate(); err == nil {
		t.Error("vcluster preempt-mode kill accepted")
	}
	q := QOS{Name: "low", PreemptMode: "kill"}
	if err := q.Validate(); err == nil {
		t.Error("qos preempt-mode kill accepted")
	}
	if m := (&VCluster{Name: "b", Type: TypeHPCBatch, Preemption: true}).EffectivePreemptMode(); m != PreemptCheckpoint {
		t.Errorf("default mode %s, want checkpoint", m)
	}
	if m := (&VCluster{Name: "s", Type: TypeSensitive, Preemption: true, PreemptMode: PreemptRequeue}).EffectivePreemptMode(); m != PreemptOff {
		t.Errorf("sensitive mode %s, want off", m)
	}
}

func TestUsagePlusEarlierRuns(t *testing.T) {
	last := &Usage{UserCPUSeconds: 1, SystemCPUSeconds: 0.5, MaxRSSBytes: 100, EnergyJoules: 10, EnergySource: EnergyRAPL}
	earlier := &Usage{UserCPUSeconds: 2, SystemCPUSeconds: 0.25, MaxRSSBytes: 300, EnergyJoules: 5, EnergySource: EnergyModel, OOMKills: 1}
	s := last.PlusEarlierRuns(earlier)
	if s.UserCPUSeconds != 3 || s.SystemCPUSeconds != 0.75 || s.MaxRSSBytes != 300 || s.EnergyJoules != 15 || s.OOMKills != 1 || s.EnergySource != EnergyModel {
		t.Fatalf("sum %+v", s)
	}
	if last.UserCPUSeconds != 1 {
		t.Fatal("the sum changed the last run's usage")
	}
	if s := last.PlusEarlierRuns(nil); s != last {
		t.Fatalf("no earlier runs: %+v", s)
	}
	if s := (*Usage)(nil).PlusEarlierRuns(earlier); s == nil || s.UserCPUSeconds != 2 {
		t.Fatalf("no usage of the last run: %+v", s)
	}
}
