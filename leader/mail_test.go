package leader

import (
	"strings"
	"testing"
	"time"

	"github.com/latticehpc/lattice/model"
)

func TestMailEvents(t *testing.T) {
	tests := []struct {
		name   string
		before MailBefore
		after  model.Allocation
		types  string
		want   []string
	}{
		{"begin", MailBefore{state: model.StateStaging}, model.Allocation{State: model.StateRunning}, "BEGIN", []string{MailBegin}},
		{"begin not asked", MailBefore{state: model.StateStaging}, model.Allocation{State: model.StateRunning}, "END", nil},
		{"end", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StateCompleted}, "END,FAIL", []string{MailEnd}},
		{"begin and end in one commit", MailBefore{state: model.StateStaging}, model.Allocation{State: model.StateCompleted, StartTime: time.Unix(1, 0)}, "BEGIN,END", []string{MailBegin, MailEnd}},
		{"launch failed: no begin", MailBefore{state: model.StateStaging}, model.Allocation{State: model.StateFailed}, "ALL", []string{MailEnd, MailFail}},
		{"fail", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StateFailed}, "FAIL", []string{MailFail}},
		{"all of a failure", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StateFailed}, "ALL", []string{MailEnd, MailFail}},
		{"time limit", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StateFailed, Reason: model.ReasonWalltimeExceeded}, "TIME_LIMIT", []string{MailTimeLimit}},
		{"requeue", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StatePending, RequeueCount: 1}, "REQUEUE", []string{MailRequeue}},
		{"no change", MailBefore{state: model.StateRunning}, model.Allocation{State: model.StateRunning}, "ALL", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, ev := range mailEvents(tc.before, &tc.after) {
				if mailWants(tc.types, ev) {
					got = append(got, ev)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
