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
	"github.com/latticehpc/lattice/model"
)

var sinfoOpts = []sopt{
	{"all", 'a', noArg, ""}, {"dead", 'd', noArg, ""}, {"exact", 'e', noArg, ""}, {"federation", 0, noArg, ""},
	{"noheader", 'h', noArg, ""}, {"help", 0, noArg, ""}, {"hide", 0, noArg, ""}, {"iterate", 'i', needArg, "!"},
	{"local", 0, noArg, ""}, {"long", 'l', noArg, ""}, {"clusters", 'M', needArg, ""}, {"nodes", 'n', needArg, ""},
	{"noconvert", 0, noArg, ""}, {"Node", 'N', noArg, ""}, {"format", 'o', needArg, ""}, {"Format", 'O', needArg, ""},
	{"partition", 'p', needArg, ""}, {"responding", 'r', noArg, ""}, {"list-reasons", 'R', noArg, ""},
	{"summarize", 's', noArg, ""}, {"sort", 'S', needArg, ""}, {"states", 't', needArg, ""}, {"reservation", 'T', noArg, ""},
	{"usage", 0, noArg, "help"}, {"verbose", 'v', noArg, ""}, {"version", 'V', noArg, ""},
}

// sinfoNode is a node as sinfo sees it: in a partition (its current
// vCluster), with Slurm's state names.
type sinfoNode struct {
	n    *latticev1.Node
	part string
	def  bool // the partition is the default one
}

// slurmNodeState is Slurm's compact node state (sinfo %t), or with long
// its full name (%T): idle, allocated, drained, draining, down, ...
func slurmNodeState(n *latticev1.Node, long bool) string {
	busy := n.GetAllocation() != 0
	var short, full string
	switch model.NodeState(n.GetState()) {
	case model.NodeReady:
		short, full = "idle", "idle"
		if busy {
			short, full = "alloc", "allocated"
		} else if n.GetReservedFor() != 0 {
			short, full = "resv", "reserved"
		}
		switch {
		case n.GetReservation() == "":
		case n.GetReservationMaint() && busy: // Slurm marks work in a maintenance window with $
			short, full = "alloc$", "allocated$"
		case n.GetReservationMaint():
			short, full = "maint", "maint"
		case !busy:
			short, full = "resv", "reserved"
		}
	case model.NodeDraining:
		short, full = "drng", "draining"
		if !busy {
			short, full = "drain", "drained"
		}
	case model.NodeDrained:
		short, full = "drain", "drained"
	case model.NodeDegraded:
		short, full = "idle*", "idle*"
		if busy {
			short, full = "alloc*", "allocated*"
		}
	case model.NodeDown:
		short, full = "down", "down"
	case model.NodeCleanup:
		short, full = "comp", "completing"
	default:
		short, full = "unk", "unknown"
	}
	if long {
		return full
	}
	return short
}

// sinfoField is one letter of sinfo's -o.
type sinfoField struct {
	letter byte
	header string
	agg    bool // summed over a line's nodes (count, list) rather than matched
	value  func(s *slurmRun, ns []sinfoNode) string
}

var sinfoFields = []sinfoField{
	{'P', "PARTITION", false, func(_ *slurmRun, ns []sinfoNode) string {
		if ns[0].def {
			return ns[0].part + "*"
		}
		return ns[0].part
	}},
	{'R', "PARTITION", false, func(_ *slurmRun, ns []sinfoNode) string { return ns[0].part }},
	{'a', "AVAIL", false, func(_ *slurmRun, ns []sinfoNode) string { return "up" }},
	{'l', "TIMELIMIT", false, func(_ *slurmRun, ns []sinfoNode) string { return "infinite" }},
	{'L', "DEFAULTTIME", false, func(_ *slurmRun, ns []sinfoNode) string { return "n/a" }},
	{'t', "STATE", false, func(_ *slurmRun, ns []sinfoNode) string { return slurmNodeState(ns[0].n, false) }},
	{'T', "STATE", false, func(_ *slurmRun, ns []sinfoNode) string { return slurmNodeState(ns[0].n, true) }},
	{'c', "CPUS", false, func(_ *slurmRun, ns []sinfoNode) string { return strconv.Itoa(int(max(ns[0].n.GetCpus(), 1))) }},
	{'m', "MEMORY", false, func(_ *slurmRun, ns []sinfoNode) string { return strconv.FormatInt(max(ns[0].n.GetMemoryMb(), 1), 10) }},
	{'f', "AVAIL_FEATURES", false, func(_ *slurmRun, ns []sinfoNode) string {
		return cmp.Or(strings.Join(ns[0].n.GetFeatures(), ","), "(null)")
	}},
	{'b', "ACTIVE_FEATURES", false, func(_ *slurmRun, ns []sinfoNode) string {
		return cmp.Or(strings.Join(ns[0].n.GetFeatures(), ","), "(null)")
	}},
	{'G', "GRES", false, func(_ *slurmRun, ns []sinfoNode) string {
		if g := ns[0].n.GetGpus(); g > 0 {
			return "gpu:" + cmp.Or(ns[0].n.GetGpuType()+":", "") + strconv.Itoa(int(g))
		}
		return "(null)"
	}},
	{'E', "REASON", false, func(_ *slurmRun, ns []sinfoNode) string { return cmp.Or(ns[0].n.GetStateReason(), "none") }},
	{'u', "USER", false, func(_ *slurmRun, ns []sinfoNode) string {
		u, _ := nodeReasonBy(ns[0].n)
		return cmp.Or(u, "Unknown")
	}},
	{'U', "USER", false, func(_ *slurmRun, ns []sinfoNode) string {
		u, _ := nodeReasonBy(ns[0].n)
		return cmp.Or(u, "Unknown")
	}},
	{'H', "TIMESTAMP", false, func(s *slurmRun, ns []sinfoNode) string {
		_, at := nodeReasonBy(ns[0].n)
		return s.slurmDate(at, "Unknown")
	}},
	{'h', "OVERSUBSCRIBE", false, func(_ *slurmRun, ns []sinfoNode) string { return "NO" }},
	{'s', "JOB_SIZE", false, func(_ *slurmRun, ns []sinfoNode) string { return "1-infinite" }},
	{'z', "S:C:T", false, func(_ *slurmRun, ns []sinfoNode) string { return fmt.Sprintf("1:%d:1", max(ns[0].n.GetCpus(), 1)) }},
	{'V', "CLUSTER", false, func(_ *slurmRun, ns []sinfoNode) string { return "lattice" }},
	{'r', "ROOT", false, func(_ *slurmRun, ns []sinfoNode) string { return "no" }},
	{'g', "GROUPS", false, func(_ *slurmRun, ns []sinfoNode) string { return "all" }},
	{'d', "TMP_DISK", false, func(_ *slurmRun, ns []sinfoNode) string { return "0" }},
	{'w', "WEIGHT", false, func(_ *slurmRun, ns []sinfoNode) string { return "1" }},
	{'D', "NODES", true, func(_ *slurmRun, ns []sinfoNode) string { return strconv.Itoa(len(ns)) }},
	{'N', "NODELIST", true, func(_ *slurmRun, ns []sinfoNode) string { return sinfoHosts(ns) }},
	{'n', "HOSTNAMES", true, func(_ *slurmRun, ns []sinfoNode) string { return sinfoHosts(ns) }},
	{'F', "NODES(A/I/O/T)", true, func(_ *slurmRun, ns []sinfoNode) string {
		var al, idle, other int
		for _, n := range ns {
			switch strings.TrimSuffix(slurmNodeState(n.n, false), "$") {
			case "alloc", "drng", "comp":
				al++
			case "idle", "resv", "maint":
				idle++
			default:
				other++
			}
		}
		return fmt.Sprintf("%d/%d/%d/%d", al, idle, other, len(ns))
	}},
	{'A', "NODES(A/I)", true, func(_ *slurmRun, ns []sinfoNode) string {
		var al, idle int
		for _, n := range ns {
			switch strings.TrimSuffix(slurmNodeState(n.n, false), "$") {
			case "alloc", "drng", "comp":
				al++
			case "idle", "resv", "maint":
				idle++
			}
		}
		return fmt.Sprintf("%d/%d", al, idle)
	}},
	{'C', "CPUS(A/I/O/T)", true, func(_ *slurmRun, ns []sinfoNode) string {
		var al, idle, other, total int
		for _, n := range ns {
			c := int(max(n.n.GetCpus(), 1))
			total += c
			switch strings.TrimSuffix(slurmNodeState(n.n, false), "$") {
			case "alloc", "drng", "comp":
				al += c
			case "idle", "resv", "maint":
				idle += c
			default:
				other += c
			}
		}
		return fmt.Sprintf("%d/%d/%d/%d", al, idle, other, total)
	}},
}

// sinfoRank orders a partition's lines as sinfo's default sort (-t:
// state, highest first): drained and draining nodes, then allocated, then
// idle, then down.
func sinfoRank(n *latticev1.Node) int {
	switch slurmNodeState(n, false) {
	case "drain", "drng":
		return 10
	case "maint":
		return 5
	case "resv":
		return 4
	case "alloc", "alloc*", "alloc$", "comp":
		return 3
	case "idle", "idle*":
		return 2
	}
	return 1
}

func sinfoHosts(ns []sinfoNode) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.n.GetName()
	}
	return hostlist(names)
}

type sinfoCol struct {
	prefix string
	f      *sinfoField
	width  int
	right  bool
	auto   bool // %#X: as wide as the widest value
}

func parseSinfoFormat(s string) ([]sinfoCol, string, error) {
	var cols []sinfoCol
	rest := s
	for {
		i := strings.IndexByte(rest, '%')
		if i < 0 {
			return cols, rest, nil
		}
		col := sinfoCol{prefix: rest[:i]}
		rest = rest[i+1:]
		if strings.HasPrefix(rest, ".") {
			col.right, rest = true, rest[1:]
		}
		if strings.HasPrefix(rest, "#") {
			col.auto, rest = true, rest[1:]
		}
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		col.width, _ = strconv.Atoi(rest[:j])
		rest = rest[j:]
		if rest == "" {
			return nil, "", fmt.Errorf("Invalid node format specification: %s", s)
		}
		for k := range sinfoFields {
			if sinfoFields[k].letter == rest[0] {
				col.f = &sinfoFields[k]
			}
		}
		if col.f == nil {
			return nil, "", fmt.Errorf("Invalid node format specification: %c", rest[0])
		}
		rest = rest[1:]
		cols = append(cols, col)
	}
}

// Slurm 22.05's sinfo formats.
const (
	sinfoDefault   = "%#P %.5a %.10l %.6D %.6t %N"
	sinfoSummarize = "%#P %.5a %.10l %.16F %N"
	sinfoNodeFmt   = "%#N %.6D %.#P %6t"
	sinfoReasons   = "%20E %9u %19H %N"
	sinfoLong      = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
	sinfoNodeLong  = "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
)

func (s *slurmRun) sinfo(args []string) error {
	a, err := s.parse(sinfoOpts, args, false, "Usage: sinfo [OPTIONS]\n  -h  no header    -N  node-oriented    -o FORMAT    -p PARTITION\n  -R  reasons      -s  summarize        -t STATES    -n NODES     -l long\n")
	if a == nil {
		return err
	}
	if len(a.pos) > 0 {
		return &slurmUsage{fmt.Sprintf("unrecognized argument '%s'", a.pos[0])}
	}
	format := sinfoDefault
	switch {
	case a.has("format"):
		format = a.get("format")
	case a.has("list-reasons"):
		format = sinfoReasons
	case a.has("summarize"):
		format = sinfoSummarize
	case a.has("Node") && a.has("long"):
		format = sinfoNodeLong
	case a.has("Node"):
		format = sinfoNodeFmt
	case a.has("long"):
		format = sinfoLong
	}
	cols, tail, err := parseSinfoFormat(format)
	if err != nil {
		return err
	}
	cn, err := s.connect(s.c)
	if err != nil {
		return err
	}
	var vcs *latticev1.ListVClustersResponse
	var nodes []*latticev1.Node
	err = cn.unary(s.c.Context, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		var err error
		if vcs, err = latticev1.NewAdminServiceClient(cc).ListVClusters(ctx, &latticev1.ListVClustersRequest{}); err != nil {
			return err
		}
		resp, err := latticev1.NewNodeServiceClient(cc).List(ctx, &latticev1.ListNodesRequest{})
		nodes = resp.GetNodes()
		return err
	})
	if err != nil {
		return fmt.Errorf("slurm_load_partitions: %w", err)
	}
	parts := a.list("partition")
	var states map[string]bool
	if a.has("states") {
		states = map[string]bool{}
		for _, w := range a.list("states") {
			states[strings.ToLower(w)] = true
		}
	}
	var only []string
	if a.has("nodes") {
		if only, err = model.ExpandHostlist(a.get("nodes")); err != nil {
			return fmt.Errorf("Invalid node name list: %s", a.get("nodes"))
		}
	}
	// Lines: per partition (in the configuration's order), nodes grouped
	// by the values of the non-aggregate fields (one node a line with -N).
	var lines [][]sinfoNode
	for _, vc := range vcs.GetVclusters() {
		name := vc.GetName()
		if len(parts) > 0 && !slices.Contains(parts, name) {
			continue
		}
		var group []sinfoNode
		for _, n := range nodes {
			if cmp.Or(n.GetCurrentVcluster(), n.GetHomeVcluster()) != name {
				continue
			}
			sn := sinfoNode{n: n, part: name, def: name == vcs.GetDefaultVcluster()}
			st := slurmNodeState(n, false)
			if states != nil && !states[strings.TrimSuffix(st, "*")] && !states[strings.ToLower(slurmNodeState(n, true))] &&
				!(states["idle"] && st == "drain") && !(states["drain"] && st == "drng") {
				continue
			}
			if len(only) > 0 && !slices.Contains(only, n.GetName()) {
				continue
			}
			if a.has("list-reasons") && n.GetStateReason() == "" && st != "drain" && st != "drng" && st != "down" {
				continue
			}
			if a.has("responding") && strings.HasSuffix(st, "*") {
				continue
			}
			group = append(group, sn)
		}
		if a.has("Node") {
			for _, n := range group {
				lines = append(lines, []sinfoNode{n})
			}
			continue
		}
		byKey := map[string]int{}
		var mine [][]sinfoNode
		for _, n := range group {
			var key strings.Builder
			for _, c := range cols {
				if !c.f.agg && (!a.has("list-reasons") || (c.f.letter != 'P' && c.f.letter != 'R')) {
					key.WriteString(c.f.value(s, []sinfoNode{n}) + "\x00")
				}
			}
			if i, ok := byKey[key.String()]; ok {
				mine[i] = append(mine[i], n)
				continue
			}
			byKey[key.String()] = len(mine)
			mine = append(mine, []sinfoNode{n})
		}
		if len(group) == 0 && !a.has("list-reasons") && states == nil && len(only) == 0 {
			// An empty partition still has its line (0 nodes, n/a).
			mine = append(mine, []sinfoNode{{part: name, def: name == vcs.GetDefaultVcluster()}})
		}
		slices.SortStableFunc(mine, func(x, y []sinfoNode) int {
			if x[0].n == nil || y[0].n == nil {
				return 0
			}
			return -cmp.Compare(sinfoRank(x[0].n), sinfoRank(y[0].n))
		})
		lines = append(lines, mine...)
	}
	if a.has("list-reasons") {
		lines = mergeReasons(s, cols, lines)
	}
	values := make([][]string, len(lines))
	for i, l := range lines {
		for _, c := range cols {
			v := ""
			if l[0].n == nil { // an empty partition
				switch c.f.letter {
				case 'P', 'R', 'a', 'l':
					v = c.f.value(s, l)
				case 'D':
					v = "0"
				case 'N', 'n':
					v = ""
				default:
					v = "n/a"
				}
			} else {
				v = c.f.value(s, l)
			}
			values[i] = append(values[i], v)
		}
	}
	for k := range cols {
		if cols[k].auto {
			w := 9 // sinfo's least width of %#P and %#N
			for _, v := range values {
				w = max(w, len(v[k]))
			}
			cols[k].width = w
		}
	}
	var b strings.Builder
	write := func(cells []string) {
		b.Reset()
		for k, c := range cols {
			b.WriteString(c.prefix)
			slurmCell(&b, cells[k], c.width, c.right)
		}
		b.WriteString(tail)
		b.WriteByte('\n')
		fmt.Fprint(s.Stdout, b.String())
	}
	if a.has("long") && !a.has("format") {
		fmt.Fprintln(s.Stdout, s.Now().In(s.Location).Format("Mon Jan 02 15:04:05 2006"))
	}
	if !a.has("noheader") {
		var h []string
		for _, c := range cols {
			h = append(h, c.f.header)
		}
		write(h)
	}
	for _, v := range values {
		write(v)
	}
	return nil
}

// mergeReasons joins the lines of sinfo -R across partitions: one line per
// reason (and user and time), every node that has it.
func mergeReasons(s *slurmRun, cols []sinfoCol, lines [][]sinfoNode) [][]sinfoNode {
	var out [][]sinfoNode
	at := map[string]int{}
	seen := map[string]bool{}
	for _, l := range lines {
		for _, n := range l {
			if seen[n.n.GetName()] {
				continue
			}
			seen[n.n.GetName()] = true
			var key strings.Builder
			for _, c := range cols {
				if !c.f.agg {
					key.WriteString(c.f.value(s, []sinfoNode{n}) + "\x00")
				}
			}
			if i, ok := at[key.String()]; ok {
				out[i] = append(out[i], n)
				continue
			}
			at[key.String()] = len(out)
			out = append(out, []sinfoNode{n})
		}
	}
	return out
}

// nodeReasonBy is who set n's reason and when (unix ms); "" and 0 when
// the system set it.
func nodeReasonBy(n *latticev1.Node) (string, int64) {
	return n.GetStateReasonBy(), n.GetStateReasonUnixMs()
}
