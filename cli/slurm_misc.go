package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc"

	latticev1 "github.com/latticehpc/lattice/api/lattice/v1"
)

// sacctmgr (show and list), sprio, sshare and salloc.

// printFields is Slurm's print_fields table (sacctmgr, sshare): a header
// and a line of dashes, each cell cut with '+' and justified in its width
// (negative: left), a space after each; or '|'-separated with -p/-P.
type printFields struct {
	names    []string
	widths   []int
	parsable int // 0, 1 (-p: a trailing '|'), 2 (-P)
	noHeader bool
}

func (p printFields) write(s *slurmRun, rows [][]string) {
	var b strings.Builder
	line := func(cells []string, header bool) {
		b.Reset()
		for i, v := range cells {
			switch {
			case p.parsable > 0:
				b.WriteString(v)
				if p.parsable == 1 || i < len(cells)-1 {
					b.WriteByte('|')
				}
			case header:
				w := p.widths[i]
				if abs := max(w, -w); len(v) > abs {
					v = v[:abs]
				}
				if w > 0 {
					fmt.Fprintf(&b, "%*s ", w, v)
				} else {
					fmt.Fprintf(&b, "%-*s ", -w, v)
				}
			default:
				sacctCell(&b, v, p.widths[i])
			}
		}
		b.WriteByte('\n')
		fmt.Fprint(s.Stdout, b.String())
	}
	if !p.noHeader {
		line(p.names, true)
		if p.parsable == 0 {
			b.Reset()
			for _, w := range p.widths {
				b.WriteString(strings.Repeat("-", max(w, -w)) + " ")
			}
			b.WriteByte('\n')
			fmt.Fprint(s.Stdout, b.String())
		}
	}
	for _, r := range rows {
		line(r, false)
	}
}

// mgrField is a field sacctmgr can print.
type mgrField struct {
	name   string // as typed in format= (case-insensitive prefix)
	header string
	width  int
}

var sacctmgrOpts = []sopt{
	{"associations", 's', noArg, ""}, {"noheader", 'n', noArg, ""}, {"parsable", 'p', noArg, ""}, {"parsable2", 'P', noArg, ""},
	{"quiet", 'Q', noArg, ""}, {"readonly", 'r', noArg, ""}, {"immediate", 'i', noArg, ""}, {"verbose", 'v', noArg, ""},
	{"version", 'V', noArg, ""}, {"help", 'h', noArg, ""}, {"usage", 0, noArg, "help"}, {"json", 0, optArg, "!"},
}

// sacctmgr lists what Lattice's accounting knows: users and their
// accounts (tenants), associations and QOS. Only show/list: accounts are
// changed with latticectl tenant and qos.
func (s *slurmRun) sacctmgr(args []string) error {
	a, err := s.parse(sacctmgrOpts, args, false, "sacctmgr [-n] [-p|-P] [-s] show|list user [NAME] | account | assoc | qos [format=FIELD[%WIDTH],...]\n")
	if a == nil {
		return err
	}
	if len(a.pos) < 2 {
		return fmt.Errorf("sacctmgr needs a command and an entity, e.g. sacctmgr show qos")
	}
	verb, ent := strings.ToLower(a.pos[0]), strings.ToLower(a.pos[1])
	if verb != "show" && verb != "list" {
		return fmt.Errorf("Lattice's sacctmgr only shows and lists; change accounts with `latticectl tenant set` and QOS with `latticectl qos set` (got %q)", a.pos[0])
	}
	var format string
	var names []string
	withAssoc := a.has("associations")
	for _, w := range a.pos[2:] {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case ok && strings.EqualFold(k, "format"):
			format = v
		case ok && (strings.EqualFold(k, "name") || strings.EqualFold(k, "names") || strings.EqualFold(k, "user") || strings.EqualFold(k, "users") || strings.EqualFold(k, "account") || strings.EqualFold(k, "accounts")):
			names = append(names, splitList(v)...)
		case ok && strings.EqualFold(k, "withassoc"):
			withAssoc = true
		case !ok && strings.EqualFold(w, "withassoc"):
			withAssoc = true
		case !ok && (strings.EqualFold(w, "where") || strings.EqualFold(w, "set")):
		case !ok:
			names = append(names, splitList(w)...)
		}
	}
	pf := printFields{noHeader: a.has("noheader")}
	switch {
	case a.has("parsable2"):
		pf.parsable = 2
	case a.has("parsable"):
		pf.parsable = 1
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix("users", ent) && len(ent) >= 1:
		return s.mgrUsers(cn, names, format, withAssoc, pf)
	case strings.HasPrefix("accounts", ent) && len(ent) >= 2:
		return s.mgrAccounts(cn, names, format, withAssoc, pf)
	case strings.HasPrefix("associations", ent) && len(ent) >= 2:
		return s.mgrAssocs(cn, names, format, pf)
	case ent == "qos":
		return s.mgrQOS(names, format, pf)
	}
	return fmt.Errorf("Unknown entity %q: Lattice's sacctmgr shows user, account, association and qos", a.pos[1])
}

// pickFields resolves format= against fields (default when empty).
func pickFields(format, def string, fields []mgrField) ([]mgrField, error) {
	var out []mgrField
	for _, part := range splitList(cmp.Or(format, def)) {
		name, w, hasW := strings.Cut(part, "%")
		var f *mgrField
		for i := range fields {
			if len(name) <= len(fields[i].name) && strings.EqualFold(fields[i].name[:len(name)], name) {
				f = &fields[i]
				break
			}
		}
		if f == nil {
			return nil, fmt.Errorf("Unknown field '%s'", name)
		}
		g := *f
		if hasW {
			if n, _ := strconv.Atoi(w); n != 0 {
				g.width = n
			}
		}
		out = append(out, g)
	}
	return out, nil
}

func (s *slurmRun) tenants(cn *conn) ([]*latticev1.TenantInfo, error) {
	var resp *latticev1.ListTenantsResponse
	err := cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		resp, err = latticev1.NewAdminServiceClient(cc).ListTenants(ctx, &latticev1.ListTenantsRequest{})
		return err
	})
	return resp.GetTenants(), err
}

// assocRow is one association: a user (or none, the account's own) in an
// account (a Lattice tenant).
type assocRow struct {
	user, account string
	t             *latticev1.TenantInfo
}

// userAccounts are the accounts (tenants) of user, its default first, as
// the replicated user records hold them (ListUsers; WhoAmI for the
// caller). Without them (an older server, or a user the caller may not
// list): the tenant named after the user, and for the caller the tenant
// they act as (LATTICE_TENANT).
func (s *slurmRun) userAccounts(cn *conn, tenants []*latticev1.TenantInfo, user string) []string {
	var u *latticev1.AccountUser
	_ = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		resp, err := latticev1.NewAccountServiceClient(cc).ListUsers(ctx, &latticev1.ListUsersRequest{Names: []string{user}})
		for _, x := range resp.GetUsers() {
			if x.GetName() == user {
				u = x
			}
		}
		return err
	})
	if u == nil {
		if me := s.whoAmI(cn); me.GetName() == user {
			u = me
		}
	}
	var out []string
	if u != nil {
		if d := u.GetDefaultTenant(); d != "" {
			out = append(out, d)
		}
		for _, t := range u.GetTenants() {
			if t != "*" && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	has := func(n string) bool {
		return slices.ContainsFunc(tenants, func(t *latticev1.TenantInfo) bool { return t.GetName() == n })
	}
	if user == s.tenantUser(cn) {
		if t := s.Getenv("LATTICE_TENANT"); t != "" && has(t) {
			out = append(out, t)
		}
	}
	if has(user) && !slices.Contains(out, user) {
		out = append(out, user)
	}
	return out
}

// whoAmI is the caller as the server sees them (nil when it cannot say).
func (s *slurmRun) whoAmI(cn *conn) *latticev1.AccountUser {
	if s.me != nil {
		return s.me
	}
	_ = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		s.me, err = latticev1.NewAccountServiceClient(cc).WhoAmI(ctx, &latticev1.AccountWhoAmIRequest{})
		return err
	})
	return s.me
}

// tenantUser is the caller's user name: the server's word, else $USER.
func (s *slurmRun) tenantUser(cn *conn) string {
	if n := s.whoAmI(cn).GetName(); n != "" {
		return n
	}
	return s.Getenv("USER")
}

var mgrAssocFields = []mgrField{
	{"Cluster", "Cluster", 10}, {"Account", "Account", 10}, {"User", "User", 10}, {"Partition", "Partition", 10},
	{"Share", "Share", 9}, {"Priority", "Priority", 10}, {"GrpJobs", "GrpJobs", 7}, {"GrpTRES", "GrpTRES", 13},
	{"GrpSubmit", "GrpSubmit", 9}, {"GrpWall", "GrpWall", 11}, {"GrpTRESMins", "GrpTRESMins", 13}, {"MaxJobs", "MaxJobs", 7},
	{"MaxTRES", "MaxTRES", 13}, {"MaxTRESPerNode", "MaxTRESPerNode", 14}, {"MaxSubmit", "MaxSubmit", 9}, {"MaxWall", "MaxWall", 11},
	{"MaxTRESMins", "MaxTRESMins", 13}, {"QOS", "QOS", 20}, {"DefaultQOS", "Def QOS", 9}, {"GrpTRESRunMins", "GrpTRESRunMins", 13},
	{"DefaultAccount", "Def Acct", 10}, {"Admin", "Admin", 9},
}

func (s *slurmRun) assocValue(f mgrField, r assocRow, defAcct string) string {
	switch f.name {
	case "Cluster":
		return "lattice"
	case "Account":
		return r.account
	case "User":
		return r.user
	case "Share":
		if r.t != nil && r.t.GetFairShareTarget() > 0 {
			return strconv.FormatFloat(r.t.GetFairShareTarget(), 'f', -1, 64)
		}
		return "1"
	case "GrpJobs":
		if r.t != nil && r.t.GetMaxRunning() > 0 && r.user == "" {
			return strconv.Itoa(int(r.t.GetMaxRunning()))
		}
	case "GrpTRES":
		if r.t != nil && r.t.GetMaxNodes() > 0 && r.user == "" {
			return "node=" + strconv.Itoa(int(r.t.GetMaxNodes()))
		}
	case "QOS":
		return "normal"
	case "DefaultAccount":
		return defAcct
	case "Admin":
		return "None"
	}
	return ""
}

func (s *slurmRun) mgrAssocTable(rows []assocRow, fields []mgrField, pf printFields, defAcct func(user string) string) {
	for _, f := range fields {
		pf.names = append(pf.names, f.header)
		pf.widths = append(pf.widths, f.width)
	}
	var out [][]string
	for _, r := range rows {
		var line []string
		for _, f := range fields {
			line = append(line, s.assocValue(f, r, defAcct(r.user)))
		}
		out = append(out, line)
	}
	pf.write(s, out)
}

func (s *slurmRun) mgrUsers(cn *conn, names []string, format string, withAssoc bool, pf printFields) error {
	tenants, err := s.tenants(cn)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = []string{s.tenantUser(cn)}
	}
	def := "User,DefaultAccount,Admin"
	if withAssoc {
		def = "User,DefaultAccount,Admin,Cluster,Account,Partition,Share,Priority,MaxJobs,MaxSubmit,MaxWall,QOS,DefaultQOS"
	}
	fields, err := pickFields(format, def, mgrAssocFields)
	if err != nil {
		return err
	}
	var rows []assocRow
	defs := map[string]string{}
	for _, u := range names {
		accts := s.userAccounts(cn, tenants, u)
		if len(accts) == 0 {
			continue
		}
		defs[u] = accts[0]
		if !withAssoc {
			rows = append(rows, assocRow{user: u, account: accts[0]})
			continue
		}
		for _, acct := range accts {
			rows = append(rows, assocRow{user: u, account: acct, t: tenantNamed(tenants, acct)})
		}
	}
	s.mgrAssocTable(rows, fields, pf, func(u string) string { return defs[u] })
	return nil
}

func tenantNamed(ts []*latticev1.TenantInfo, name string) *latticev1.TenantInfo {
	for _, t := range ts {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

func (s *slurmRun) mgrAccounts(cn *conn, names []string, format string, withAssoc bool, pf printFields) error {
	tenants, err := s.tenants(cn)
	if err != nil {
		return err
	}
	fields := []mgrField{{"Account", "Account", 10}, {"Descr", "Descr", 20}, {"Org", "Org", 20}}
	if withAssoc {
		fields = append(fields, mgrField{"Cluster", "Cluster", 10}, mgrField{"ParentName", "Par Name", 10}, mgrField{"User", "User", 10},
			mgrField{"Share", "Share", 9}, mgrField{"GrpJobs", "GrpJobs", 7}, mgrField{"GrpTRES", "GrpTRES", 13})
	}
	sel, err := pickFields(format, "", fields)
	if format == "" {
		sel, err = fields, nil
	}
	if err != nil {
		return err
	}
	var out [][]string
	for _, t := range tenants {
		if len(names) > 0 && !slices.Contains(names, t.GetName()) {
			continue
		}
		var line []string
		for _, f := range sel {
			switch f.name {
			case "Account":
				line = append(line, t.GetName())
			case "Descr", "Org":
				line = append(line, strings.ToLower(t.GetName()))
			case "ParentName":
				line = append(line, "root")
			default:
				line = append(line, s.assocValue(f, assocRow{account: t.GetName(), t: t}, ""))
			}
		}
		out = append(out, line)
	}
	for _, f := range sel {
		pf.names = append(pf.names, f.header)
		pf.widths = append(pf.widths, f.width)
	}
	pf.write(s, out)
	return nil
}

func (s *slurmRun) mgrAssocs(cn *conn, names []string, format string, pf printFields) error {
	tenants, err := s.tenants(cn)
	if err != nil {
		return err
	}
	fields, err := pickFields(format, "Cluster,Account,User,Partition,Share,Priority,GrpJobs,GrpTRES,GrpSubmit,GrpWall,GrpTRESMins,MaxJobs,MaxTRES,MaxTRESPerNode,MaxSubmit,MaxWall,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins", mgrAssocFields)
	if err != nil {
		return err
	}
	me := s.tenantUser(cn)
	var rows []assocRow
	for _, t := range tenants {
		if len(names) > 0 && !slices.Contains(names, t.GetName()) && !slices.Contains(names, me) {
			continue
		}
		rows = append(rows, assocRow{account: t.GetName(), t: t})
		if slices.Contains(s.userAccounts(cn, tenants, me), t.GetName()) {
			rows = append(rows, assocRow{user: me, account: t.GetName(), t: t})
		}
	}
	s.mgrAssocTable(rows, fields, pf, func(string) string { return "" })
	return nil
}

var mgrQOSFields = []mgrField{
	{"Name", "Name", 10}, {"Priority", "Priority", 10}, {"GraceTime", "GraceTime", 10}, {"Preempt", "Preempt", 10},
	{"PreemptExemptTime", "PreemptExemptTime", 19}, {"PreemptMode", "PreemptMode", 11}, {"Flags", "Flags", 10},
	{"UsageThres", "UsageThres", 10}, {"UsageFactor", "UsageFactor", 11}, {"GrpTRES", "GrpTRES", 13},
	{"GrpTRESMins", "GrpTRESMins", 13}, {"GrpTRESRunMins", "GrpTRESRunMins", 13}, {"GrpJobs", "GrpJobs", 7},
	{"GrpSubmit", "GrpSubmit", 9}, {"GrpWall", "GrpWall", 11}, {"MaxTRES", "MaxTRES", 13}, {"MaxTRESPerNode", "MaxTRESPerNode", 14},
	{"MaxTRESMins", "MaxTRESMins", 13}, {"MaxWall", "MaxWall", 11}, {"MaxTRESPU", "MaxTRESPU", 13}, {"MaxJobsPU", "MaxJobsPU", 9},
	{"MaxSubmitPU", "MaxSubmitPU", 11}, {"MaxTRESPA", "MaxTRESPA", 13}, {"MaxJobsPA", "MaxJobsPA", 9}, {"MaxSubmitPA", "MaxSubmitPA", 11},
	{"MinTRES", "MinTRES", 13}, {"Description", "Descr", 11},
}

func (s *slurmRun) mgrQOS(names []string, format string, pf printFields) error {
	resp, err := s.listQOS(s.c)
	if err != nil {
		return err
	}
	fields, err := pickFields(format, "Name,Priority,GraceTime,Preempt,PreemptExemptTime,PreemptMode,Flags,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,GrpTRESRunMins,GrpJobs,GrpSubmit,GrpWall,MaxTRES,MaxTRESPerNode,MaxTRESMins,MaxWall,MaxTRESPU,MaxJobsPU,MaxSubmitPU,MaxTRESPA,MaxJobsPA,MaxSubmitPA,MinTRES", mgrQOSFields)
	if err != nil {
		return err
	}
	var out [][]string
	for _, q := range resp.GetQos() {
		if len(names) > 0 && !slices.Contains(names, q.GetName()) {
			continue
		}
		var line []string
		for _, f := range fields {
			v := ""
			switch f.name {
			case "Name":
				v = q.GetName()
			case "Priority":
				v = strconv.Itoa(int(q.GetPriorityClass()))
			case "GraceTime":
				v = "00:00:00"
			case "PreemptMode":
				v = cmp.Or(strings.ToUpper(q.GetPreemptMode()), "cluster")
			case "UsageFactor":
				v = "1.000000"
			case "MaxWall":
				if w := q.GetMaxWalltimeSeconds(); w > 0 {
					v = slurmClock(w)
				}
			case "MaxTRES":
				if n := q.GetMaxNodes(); n > 0 {
					v = "node=" + strconv.Itoa(int(n))
				}
			case "Description":
				v = q.GetDescription()
			}
			line = append(line, v)
		}
		out = append(out, line)
	}
	for _, f := range fields {
		pf.names = append(pf.names, f.header)
		pf.widths = append(pf.widths, f.width)
	}
	pf.write(s, out)
	return nil
}

// ---- sprio ----

var sprioOpts = []sopt{
	{"noheader", 'h', noArg, ""}, {"jobs", 'j', needArg, ""}, {"long", 'l', noArg, ""}, {"cluster", 'M', needArg, ""},
	{"norm", 'n', noArg, ""}, {"format", 'o', needArg, ""}, {"partition", 'p', needArg, ""}, {"user", 'u', needArg, ""},
	{"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""}, {"weights", 'w', noArg, ""}, {"help", 0, noArg, ""},
	{"usage", 0, noArg, "help"}, {"sort", 'S', needArg, ""},
}

// sprio lists pending jobs with their priority: Lattice's score (scaled
// to an integer as Slurm's is) and its factors by name.
func (s *slurmRun) sprio(args []string) error {
	a, err := s.parse(sprioOpts, args, false, "Usage: sprio [-j jobid[,jobid...]] [-u user[,user...]] [-p partition] [-h] [-l] [-n] [-w]\n")
	if a == nil {
		return err
	}
	all, err := s.listAllocations(s.c, &latticev1.ListAllocationsRequest{States: []string{"PENDING"}})
	if err != nil {
		return err
	}
	ids, users, parts := a.list("jobs"), a.list("user"), a.list("partition")
	var factorNames []string
	var jobs []*latticev1.Allocation
	for _, al := range all {
		if (len(ids) > 0 && !slices.Contains(ids, displayID(al))) || (len(users) > 0 && !slices.Contains(users, slurmUser(al))) ||
			(len(parts) > 0 && !slices.Contains(parts, al.GetRequest().GetVcluster())) {
			continue
		}
		jobs = append(jobs, al)
		for _, f := range al.GetExplanation().GetFactors() {
			if !slices.Contains(factorNames, f.GetName()) {
				factorNames = append(factorNames, f.GetName())
			}
		}
	}
	if a.has("weights") {
		fmt.Fprintf(s.Stdout, "%15s %9s", "JOBID", "PARTITION")
		fmt.Fprintf(s.Stdout, " %10s", "PRIORITY")
		for _, n := range factorNames {
			fmt.Fprintf(s.Stdout, " %10.10s", strings.ToUpper(n))
		}
		fmt.Fprintln(s.Stdout)
		return nil
	}
	scale := 1e6
	if !a.has("noheader") {
		fmt.Fprintf(s.Stdout, "%15s %-9s %10s", "JOBID", "PARTITION", "PRIORITY")
		for _, n := range factorNames {
			fmt.Fprintf(s.Stdout, " %10.10s", strings.ToUpper(n))
		}
		fmt.Fprintln(s.Stdout)
	}
	for _, al := range jobs {
		e := al.GetExplanation()
		fmt.Fprintf(s.Stdout, "%15.15s %-9.9s %10d", displayID(al), al.GetRequest().GetVcluster(), int64(e.GetScore()*scale))
		for _, n := range factorNames {
			v := 0.0
			for _, f := range e.GetFactors() {
				if f.GetName() == n {
					v = f.GetContribution()
				}
			}
			if a.has("norm") {
				fmt.Fprintf(s.Stdout, " %10.7f", v)
			} else {
				fmt.Fprintf(s.Stdout, " %10d", int64(v*scale))
			}
		}
		fmt.Fprintln(s.Stdout)
	}
	return nil
}

// ---- sshare ----

var sshareOpts = []sopt{
	{"accounts", 'A', needArg, ""}, {"all", 'a', noArg, ""}, {"helpformat", 0, noArg, ""}, {"long", 'l', noArg, ""},
	{"partition", 'm', noArg, ""}, {"clusters", 'M', needArg, ""}, {"noheader", 'n', noArg, ""}, {"format", 'o', needArg, ""},
	{"parsable", 'p', noArg, ""}, {"parsable2", 'P', noArg, ""}, {"users", 'u', needArg, ""}, {"user", 'U', noArg, "useronly"},
	{"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""}, {"help", 'h', noArg, ""}, {"usage", 0, noArg, "help"},
}

// sshare shows fair share by account (Lattice tenant): target share,
// usage and the share it has used.
func (s *slurmRun) sshare(args []string) error {
	a, err := s.parse(sshareOpts, args, false, "Usage: sshare [-A accounts] [-a] [-l] [-n] [-p|-P] [-u users] [-o format]\n")
	if a == nil {
		return err
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	tenants, err := s.tenants(cn)
	if err != nil {
		return err
	}
	fields := []mgrField{{"Account", "Account", -20}, {"User", "User", 10}, {"RawShares", "RawShares", 10}, {"NormShares", "NormShares", 11},
		{"RawUsage", "RawUsage", 11}, {"EffectvUsage", "EffectvUsage", 13}, {"FairShare", "FairShare", 10}}
	sel := fields
	if a.has("format") {
		if sel, err = pickFields(a.get("format"), "", fields); err != nil {
			return err
		}
	}
	pf := printFields{noHeader: a.has("noheader")}
	switch {
	case a.has("parsable2"):
		pf.parsable = 2
	case a.has("parsable"):
		pf.parsable = 1
	}
	for _, f := range sel {
		pf.names = append(pf.names, f.header)
		pf.widths = append(pf.widths, f.width)
	}
	accts := a.list("accounts")
	total := 0.0
	for _, t := range tenants {
		total += t.GetFairShareTarget()
	}
	rows := [][]string{}
	root := make([]string, len(sel))
	for i, f := range sel {
		switch f.name {
		case "Account":
			root[i] = "root"
		case "NormShares", "EffectvUsage":
			root[i] = "1.000000"
		case "RawUsage":
			sum := 0.0
			for _, t := range tenants {
				sum += t.GetUsageNodeSeconds()
			}
			root[i] = strconv.FormatInt(int64(sum), 10)
		}
	}
	rows = append(rows, root)
	for _, t := range tenants {
		if len(accts) > 0 && !slices.Contains(accts, t.GetName()) {
			continue
		}
		line := make([]string, len(sel))
		for i, f := range sel {
			switch f.name {
			case "Account":
				line[i] = " " + t.GetName()
			case "RawShares":
				line[i] = strconv.FormatFloat(t.GetFairShareTarget(), 'f', -1, 64)
			case "NormShares":
				if total > 0 {
					line[i] = fmt.Sprintf("%f", t.GetFairShareTarget()/total)
				}
			case "RawUsage":
				line[i] = strconv.FormatInt(int64(t.GetUsageNodeSeconds()), 10)
			case "EffectvUsage":
				line[i] = fmt.Sprintf("%f", t.GetUsageShare())
			case "FairShare":
				fs := 1.0
				if target := t.GetFairShareTarget(); total > 0 && target > 0 {
					fs = max(0, 1-t.GetUsageShare()/(target/total)/2)
				}
				line[i] = fmt.Sprintf("%f", fs)
			}
		}
		rows = append(rows, line)
	}
	pf.write(s, rows)
	return nil
}

// ---- salloc ----

// salloc is `latticectl alloc` when this latticectl has it.
func salloc(ctx context.Context, env Env, args []string) int {
	r := &runner{Env: env}
	if findCommand(r.app().Commands, "alloc") == nil {
		fmt.Fprintln(env.Stderr, "salloc: error: salloc is not available in this Lattice yet (it will run `latticectl alloc`); submit with sbatch, or run steps with srun inside a job")
		return 1
	}
	return Main(ctx, env, append([]string{"alloc"}, args...))
}
