package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latticehpc/lattice/model"
	"github.com/latticehpc/lattice/quorum"
)

// The site mail hook: sbatch's --mail-type/--mail-user act through a
// command the site configures (latticed --mail-hook), run by the leader
// with the event in its environment. Best effort: an event is sent by the
// leader that committed the change; one committed just before a leader
// change may be missed, never sent twice by a retried report (a repeated
// report changes nothing).

// Mail events, as sbatch names them.
const (
	MailBegin     = "BEGIN"
	MailEnd       = "END"
	MailFail      = "FAIL"
	MailRequeue   = "REQUEUE"
	MailTimeLimit = "TIME_LIMIT"
)

// mailHookTimeout bounds one run of the hook.
const mailHookTimeout = 30 * time.Second

// Mail runs the site's mail hook (sh -c, on the leader) for the events of
// committed changes; a nil *Mail runs nothing.
type Mail struct {
	hook string
	log  *slog.Logger
	view func(func(*quorum.State))
}

// NewMail runs hook (nil when hook is empty) over the state view reads.
func NewMail(hook string, log *slog.Logger, view func(func(*quorum.State))) *Mail {
	if hook == "" {
		return nil
	}
	return &Mail{hook: hook, log: log, view: view}
}

// On reports whether a hook runs.
func (m *Mail) On() bool { return m != nil }

// MailBefore is what an allocation was before a change, to tell its events.
type MailBefore struct {
	state    model.AllocState
	requeues int
}

// Snapshot records, for the allocations of ids that asked for mail,
// what they are now (before a change is proposed).
func (m *Mail) Snapshot(ids []uint64) map[uint64]MailBefore {
	if m == nil {
		return nil
	}
	var out map[uint64]MailBefore
	m.view(func(st *quorum.State) {
		for _, id := range ids {
			if a := st.Allocation(id); a != nil && a.MailType != "" && a.MailType != "NONE" {
				if out == nil {
					out = map[uint64]MailBefore{}
				}
				out[id] = MailBefore{a.State, a.RequeueCount}
			}
		}
	})
	return out
}

// After runs the hook for every event the committed change caused.
func (m *Mail) After(before map[uint64]MailBefore) {
	if m == nil || len(before) == 0 {
		return
	}
	ids := make([]uint64, 0, len(before))
	for id := range before {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	m.view(func(st *quorum.State) {
		for _, id := range ids {
			a := st.Allocation(id)
			if a == nil {
				continue
			}
			for _, ev := range mailEvents(before[id], a) {
				if mailWants(a.MailType, ev) {
					if ev == MailBegin && a.State != model.StateRunning {
						// Began and ended in one commit: its BEGIN says RUNNING, as it was.
						began := *a
						began.State, began.Reason, began.ExitCode = model.StateRunning, "", nil
						m.run(ev, &began)
						continue
					}
					m.run(ev, a)
				}
			}
		}
	})
}

// mailEvents are the events of a change from b to a.
func mailEvents(b MailBefore, a *model.Allocation) []string {
	var out []string
	switch {
	case a.State == model.StateRunning && (b.state == model.StateStaging || b.state == model.StatePending):
		out = append(out, MailBegin)
	case a.State.Terminal() && !b.state.Terminal():
		if (b.state == model.StateStaging || b.state == model.StatePending) && !a.StartTime.IsZero() {
			// It started and ended in one commit (a short job's start and
			// end reports share a batch): it began too.
			out = append(out, MailBegin)
		}
		out = append(out, MailEnd)
		if a.State == model.StateFailed {
			out = append(out, MailFail)
		}
		if a.Reason == model.ReasonWalltimeExceeded {
			out = append(out, MailTimeLimit)
		}
	case a.RequeueCount > b.requeues:
		out = append(out, MailRequeue)
	}
	return out
}

// mailWants reports whether --mail-type types asks for event.
func mailWants(types, event string) bool {
	for _, t := range strings.Split(types, ",") {
		switch t {
		case event:
			return true
		case "ALL":
			if event == MailBegin || event == MailEnd || event == MailFail || event == MailRequeue {
				return true
			}
		}
	}
	return false
}

// run starts the hook for one event; it does not wait for it.
func (m *Mail) run(event string, a *model.Allocation) {
	to := a.MailUser
	if to == "" {
		to = a.User
	}
	exit := ""
	if a.ExitCode != nil {
		exit = strconv.Itoa(*a.ExitCode)
	}
	verb := map[string]string{MailBegin: "Began", MailEnd: "Ended", MailFail: "Failed", MailRequeue: "Requeued", MailTimeLimit: "Reached time limit"}[event]
	subject := fmt.Sprintf("Lattice Job_id=%s Name=%s %s, %s", a.DisplayID(), a.Name, verb, a.State)
	if exit != "" {
		subject += ", ExitCode " + exit
	}
	env := append(os.Environ(),
		"LATTICE_MAIL_EVENT="+event, "LATTICE_MAIL_USER="+to, "LATTICE_MAIL_SUBJECT="+subject,
		"LATTICE_ALLOC_ID="+a.DisplayID(), "LATTICE_ALLOC_NAME="+a.Name, "LATTICE_ALLOC_USER="+a.User,
		"LATTICE_ALLOC_STATE="+string(a.State), "LATTICE_ALLOC_REASON="+a.Reason, "LATTICE_ALLOC_EXIT_CODE="+exit)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), mailHookTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", m.hook)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			m.log.Warn("mail hook failed", "alloc", a.DisplayID(), "event", event, "err", err, "output", strings.TrimSpace(string(out)))
			return
		}
		m.log.Info("mail hook ran", "alloc", a.DisplayID(), "event", event, "to", to)
	}()
}
