package dag

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latticehpc/lattice/model"
)

// File is a workflow file as written.
type File struct {
	ID          string  // dag_id
	Allocations []Stage // in file order
	Edges       []Edge  // the optional top-level edges
	// Services are the optional top-level services (services.go).
	Services []model.ServiceSpec
}

// Stage is one entry of allocations.
type Stage struct {
	Line          int
	Name          string
	Tenant        string
	Project       string
	VCluster      string
	Entrypoint    []string // a command line (one element, run by sh -c) or an argv
	Script        string   // a batch script's contents
	Nodes         string   // N or MIN-MAX
	WalltimeHours float64  // the reference design's form
	Walltime      string   // Slurm forms or Go durations
	PriorityClass *int
	Checkpoint    string
	Array         string // START-END[:STEP][%MAX]
	Env           []string
	DependsOn     []Edge // To is this stage
}

// Edge is one dependency: To waits on From under Condition ("" = success).
type Edge struct {
	Line      int
	From, To  string
	Condition string
}

// Error is a problem with a workflow file, at a line when one is known.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errAt(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// MaxFileBytes bounds a workflow file.
const MaxFileBytes = 4 << 20

var (
	topKeys   = []string{"dag_id", "allocations", "edges", "services"}
	stageKeys = []string{"name", "tenant", "project", "vcluster", "entrypoint", "script", "nodes", "walltime_hours", "walltime",
		"priority_class", "checkpoint", "array", "env", "depends_on"}
	depKeys  = []string{"name", "condition"}
	edgeKeys = []string{"from", "to", "condition"}
)

// Parse reads a workflow file. Unknown keys, values of the wrong kind and
// YAML errors are reported with their line.
func Parse(data []byte) (*File, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{Msg: fmt.Sprintf("the file has %d bytes; at most %d are allowed", len(data), MaxFileBytes)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &Error{Msg: "the file is empty; it needs dag_id and allocations"}
	}
	root := doc.Content[0]
	f := &File{}
	err := walkMap(root, "the top level", topKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "dag_id":
			f.ID, err = scalar(v, "dag_id")
		case "allocations":
			err = walkSeq(v, "allocations", func(item *yaml.Node) error {
				st, err := parseStage(item)
				if err == nil {
					f.Allocations = append(f.Allocations, st)
				}
				return err
			})
		case "services":
			err = walkSeq(v, "services", func(item *yaml.Node) error {
				sp, err := parseService(item)
				if err == nil {
					f.Services = append(f.Services, sp)
				}
				return err
			})
		case "edges":
			err = walkSeq(v, "edges", func(item *yaml.Node) error {
				e := Edge{Line: item.Line}
				err := walkMap(item, "an edge", edgeKeys, func(key string, _, v *yaml.Node) error {
					var err error
					switch key {
					case "from":
						e.From, err = scalar(v, "from")
					case "to":
						e.To, err = scalar(v, "to")
					case "condition":
						e.Condition, err = scalar(v, "condition")
					}
					return err
				})
				if err == nil {
					f.Edges = append(f.Edges, e)
				}
				return err
			})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

func parseStage(n *yaml.Node) (Stage, error) {
	st := Stage{Line: n.Line}
	where := fmt.Sprintf("allocation %d", n.Line)
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
				where = fmt.Sprintf("allocation %q", n.Content[i+1].Value)
			}
		}
	}
	err := walkMap(n, where, stageKeys, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			st.Name, err = scalar(v, "name")
		case "tenant":
			st.Tenant, err = scalar(v, "tenant")
		case "project":
			st.Project, err = scalar(v, "project")
		case "vcluster":
			st.VCluster, err = scalar(v, "vcluster")
		case "entrypoint":
			if v.Kind == yaml.SequenceNode {
				st.Entrypoint, err = scalars(v, "entrypoint")
			} else {
				var s string
				s, err = scalar(v, "entrypoint")
				if strings.TrimSpace(s) != "" {
					st.Entrypoint = []string{s}
				}
			}
		case "script":
			st.Script, err = scalar(v, "script")
		case "nodes":
			st.Nodes, err = scalar(v, "nodes")
		case "walltime_hours":
			var s string
			if s, err = scalar(v, "walltime_hours"); err == nil {
				st.WalltimeHours, err = strconv.ParseFloat(s, 64)
				if err != nil || st.WalltimeHours <= 0 {
					err = errAt(v.Line, "invalid walltime_hours %q: allowed a number of hours > 0, such as 2 or 0.5", s)
				}
			}
		case "walltime":
			st.Walltime, err = scalar(v, "walltime")
		case "priority_class":
			var s string
			if s, err = scalar(v, "priority_class"); err == nil {
				p, perr := strconv.Atoi(s)
				if perr != nil {
					return errAt(v.Line, "invalid priority_class %q: allowed an integer 0..10", s)
				}
				st.PriorityClass = &p
			}
		case "checkpoint":
			st.Checkpoint, err = scalar(v, "checkpoint")
		case "array":
			st.Array, err = scalar(v, "array")
		case "env":
			st.Env, err = parseEnv(v)
		case "depends_on":
			err = walkSeq(v, "depends_on", func(item *yaml.Node) error {
				e := Edge{Line: item.Line}
				if item.Kind == yaml.ScalarNode { // shorthand: the name, on success
					e.From = item.Value
				} else if err := walkMap(item, "a depends_on entry", depKeys, func(key string, _, v *yaml.Node) error {
					var err error
					switch key {
					case "name":
						e.From, err = scalar(v, "name")
					case "condition":
						e.Condition, err = scalar(v, "condition")
					}
					return err
				}); err != nil {
					return err
				}
				st.DependsOn = append(st.DependsOn, e)
				return nil
			})
		}
		return err
	})
	for i := range st.DependsOn {
		st.DependsOn[i].To = st.Name
	}
	return st, err
}

// parseEnv accepts a mapping (KEY: value) or a list of KEY=VALUE.
func parseEnv(v *yaml.Node) ([]string, error) {
	switch v.Kind {
	case yaml.MappingNode:
		var out []string
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			if err := plain(k, "env"); err != nil {
				return nil, err
			}
			s, err := scalar(val, "env "+k.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, k.Value+"="+s)
		}
		sort.Strings(out)
		return out, nil
	case yaml.SequenceNode:
		out, err := scalars(v, "env")
		if err != nil {
			return nil, err
		}
		for i, e := range out {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return nil, errAt(v.Content[i].Line, "invalid env %q: allowed KEY=VALUE", e)
			}
		}
		sort.Strings(out)
		return out, nil
	}
	return nil, errAt(v.Line, "invalid env: allowed a mapping (KEY: value) or a list of KEY=VALUE")
}

// walkMap calls fn for each key of a mapping, refusing unknown and
// repeated keys.
func walkMap(n *yaml.Node, where string, allowed []string, fn func(key string, k, v *yaml.Node) error) error {
	if err := plain(n, where); err != nil {
		return err
	}
	if n.Kind != yaml.MappingNode {
		return errAt(n.Line, "%s must be a mapping of %s", where, strings.Join(allowed, ", "))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if err := plain(k, where); err != nil {
			return err
		}
		if err := plain(v, where); err != nil {
			return err
		}
		key := k.Value
		if !contains(allowed, key) {
			msg := fmt.Sprintf("unknown key %q in %s; allowed: %s", key, where, strings.Join(allowed, ", "))
			if near := nearest(key, allowed); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
			return errAt(k.Line, "%s", msg)
		}
		if prev, dup := seen[key]; dup {
			return errAt(k.Line, "key %q appears twice in %s (first at line %d)", key, where, prev)
		}
		seen[key] = k.Line
		if err := fn(key, k, v); err != nil {
			return err
		}
	}
	return nil
}

func walkSeq(n *yaml.Node, what string, fn func(item *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return errAt(n.Line, "%s must be a list", what)
	}
	for _, item := range n.Content {
		if err := plain(item, what); err != nil {
			return err
		}
		if err := fn(item); err != nil {
			return err
		}
	}
	return nil
}

// plain refuses YAML aliases (they would let a small file expand without
// bound) and anything that is not an ordinary node.
func plain(n *yaml.Node, where string) error {
	switch n.Kind {
	case yaml.AliasNode:
		return errAt(n.Line, "YAML aliases (*%s) are not supported in %s; write the value out", n.Value, where)
	case yaml.DocumentNode:
		return errAt(n.Line, "unexpected document in %s", where)
	}
	return nil
}

func scalar(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", errAt(n.Line, "%s must be a single value, not a %s", field, kindName(n.Kind))
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

func scalars(n *yaml.Node, field string) ([]string, error) {
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		if err := plain(c, field); err != nil {
			return nil, err
		}
		s, err := scalar(c, field)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nearest returns the allowed key closest to key when it is a likely typo.
func nearest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := distance(key, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

// distance is the Levenshtein distance of two short strings.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
