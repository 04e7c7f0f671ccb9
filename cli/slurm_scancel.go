package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
	"github.com/latticehpc/lattice/model"
)

var scancelOpts = []sopt{
	{"account", 'A', needArg, ""}, {"batch", 'b', noArg, ""}, {"ctld", 0, noArg, ""}, {"full", 'f', noArg, ""},
	{"hurry", 'H', noArg, ""}, {"interactive", 'i', noArg, ""}, {"clusters", 'M', needArg, ""}, {"name", 'n', needArg, ""},
	{"jobname", 0, needArg, "name"}, {"partition", 'p', needArg, ""}, {"quiet", 'Q', noArg, ""}, {"qos", 'q', needArg, ""},
	{"reservation", 'R', needArg, ""}, {"sibling", 0, needArg, ""}, {"signal", 's', needArg, ""}, {"state", 't', needArg, ""},
	{"user", 'u', needArg, ""}, {"me", 0, noArg, ""}, {"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""},
	{"nodelist", 'w', needArg, ""}, {"wckey", 0, needArg, ""}, {"help", 'h', noArg, ""}, {"usage", 0, noArg, "help"},
}

// scancel cancels (or with -s signals) jobs by id and/or filter, silent on
// success as Slurm's is; each job it cannot cancel is one error line, and
// the exit code is then 1.
func (s *slurmRun) scancel(args []string) error {
	a, err := s.parse(scancelOpts, args, false, "Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]\n               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]\n               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]\n               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]\n               [job_id[_array_id][.step_id]]\n")
	if a == nil {
		return err
	}
	var ids []string
	for _, p := range a.pos {
		for _, id := range strings.Split(p, ",") { // scancel 1,2 and scancel 1 2
			if id = strings.TrimSpace(id); id == "" {
				continue
			}
			if job, step, ok := strings.Cut(id, "."); ok { // 12.0: steps are not cancelled alone
				return fmt.Errorf("Lattice cancels whole jobs, not step %s of job %s", step, job)
			}
			exp, err := expandIDs([]string{id})
			if err != nil {
				return fmt.Errorf("Invalid job id %s", id)
			}
			ids = append(ids, exp...)
		}
	}
	sig := a.get("signal")
	if sig != "" {
		if _, err := model.ParseSignal(sig); err != nil {
			return fmt.Errorf("Invalid job signal: %s", sig)
		}
	}
	var states map[string]bool
	if a.has("state") {
		if states, err = parseSlurmStates(s.name, a.get("state")); err != nil {
			return err
		}
	}
	users := a.list("user")
	if a.has("me") {
		cn, err := s.connect(s.c)
		if err != nil {
			return err
		}
		users = append(users, s.tenantUser(cn))
	}
	accounts, names, parts, qos := a.list("account"), a.list("name"), a.list("partition"), a.list("qos")
	filtered := states != nil || len(users)+len(accounts)+len(names)+len(parts)+len(qos) > 0 || a.has("nodelist")
	if len(ids) == 0 && !filtered {
		return fmt.Errorf("No job identification provided")
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	if filtered {
		var nodes []string
		if a.has("nodelist") {
			if nodes, err = model.ExpandHostlist(a.get("nodelist")); err != nil {
				return fmt.Errorf("Invalid node list: %s", a.get("nodelist"))
			}
		}
		all, err := s.listAllocations(s.c, &latticev1.ListAllocationsRequest{})
		if err != nil {
			return err
		}
		var keep []string
		for _, al := range all {
			r := al.GetRequest()
			if model.AllocState(al.GetState()).Terminal() ||
				(len(ids) > 0 && !slices.Contains(ids, displayID(al)) && !slices.Contains(ids, strconv.FormatUint(al.GetArrayJobId(), 10))) ||
				(states != nil && !states[slurmState(al)]) ||
				(len(users) > 0 && !slices.Contains(users, slurmUser(al))) ||
				(len(accounts) > 0 && !slices.Contains(accounts, r.GetTenant())) ||
				(len(names) > 0 && !slices.Contains(names, r.GetName())) ||
				(len(parts) > 0 && !slices.Contains(parts, r.GetVcluster())) ||
				(len(qos) > 0 && !slices.Contains(qos, r.GetQos())) ||
				(len(nodes) > 0 && !slices.ContainsFunc(al.GetNodes(), func(n string) bool { return slices.Contains(nodes, n) })) {
				continue
			}
			keep = append(keep, displayID(al))
		}
		if len(keep) == 0 {
			return nil // Slurm: nothing matched, nothing to say
		}
		ids = keep
	}
	failed := 0
	report := func(id, msg string) {
		// As Slurm 22.05's scancel: a job that does not exist or has
		// ended is reported only with -v, and is no failure.
		if msg == "Invalid job id specified" || strings.Contains(msg, "already completing") {
			if a.has("verbose") && !a.has("quiet") {
				fmt.Fprintf(s.Stderr, "scancel: error: Kill job error on job id %s: %s\n", id, msg)
			}
			return
		}
		failed++
		fmt.Fprintf(s.Stderr, "scancel: error: Kill job error on job id %s: %s\n", id, msg)
	}
	if sig != "" {
		for _, id := range ids {
			var resp *latticev1.JobControlResponse
			err := cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
				var err error
				resp, err = latticev1.NewAllocationServiceClient(cc).Signal(ctx, &latticev1.SignalRequest{Ids: []string{id}, Signal: sig})
				return err
			})
			switch {
			case err != nil:
				report(id, slurmJobError(err.Error()))
			default:
				for _, res := range resp.GetResults() {
					if !res.GetOk() {
						report(res.GetId(), slurmJobError(res.GetError()))
					}
				}
			}
		}
	} else {
		for i, id := range ids {
			var resp *latticev1.CancelResponse
			err := cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
				var err error
				resp, err = latticev1.NewAllocationServiceClient(cc).Cancel(ctx, &latticev1.CancelRequest{Ids: []string{id}, ClientRequestId: fmt.Sprintf("%s-%d", s.reqID(), i)})
				return err
			})
			switch {
			case err != nil && (rpcCode(err) == codes.NotFound || rpcCode(err) == codes.FailedPrecondition || rpcCode(err) == codes.InvalidArgument):
				report(id, slurmJobError(err.Error()))
			case err != nil:
				return err
			default:
				for _, res := range resp.GetResults() {
					if res.GetError() != "" {
						report(res.GetId(), slurmJobError(res.GetError()))
					}
				}
			}
		}
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// slurmJobError turns the server's reason a job could not be changed into
// Slurm's wording where Slurm has one.
func slurmJobError(msg string) string {
	l := strings.ToLower(msg)
	switch {
	case isNotFoundText(msg):
		return "Invalid job id specified"
	case strings.Contains(l, "already") || strings.Contains(l, "ended") || strings.Contains(l, "terminal") || strings.Contains(l, "finished"):
		return "Job/step already completing or completed"
	case strings.Contains(l, "permission") || strings.Contains(l, "may not"):
		return "Access/permission denied"
	}
	return msg
}
