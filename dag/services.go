package dag

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/latticehpc/lattice/model"
)

// A workflow file may list services (docs/services.md) under the top-level
// key services: latticectl creates them before it submits the stages, so
// the stages find them running (latticectl service endpoints NAME). They
// are not stages: nothing depends on them and they outlive the workflow
// (latticectl service delete NAME ends one).

var serviceKeys = []string{"name", "tenant", "vcluster", "qos", "priority_class", "min_nodes", "max_nodes", "scale_metric",
	"scale_target", "scale_cooldown", "scale_stabilization", "drain_time", "env", "constraint", "entrypoint"}

// parseService reads one entry of services.
func parseService(n *yaml.Node) (model.ServiceSpec, error) {
	var sp model.ServiceSpec
	integer := func(v *yaml.Node, key string) (int, error) {
		s, err := scalar(v, key)
		if err != nil {
			return 0, err
		}
		i, err := strconv.Atoi(s)
		if err != nil {
			return 0, errAt(v.Line, "invalid %s %q: allowed an integer", key, s)
		}
		return i, nil
	}
	duration := func(v *yaml.Node, key string) (time.Duration, error) {
		s, err := scalar(v, key)
		if err != nil {
			return 0, err
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, errAt(v.Line, "invalid %s %q: allowed a duration such as 30s or 5m", key, s)
		}
		if d == 0 {
			d = -1 // explicitly none (0 takes the default)
		}
		return d, nil
	}
	err := walkMap(n, fmt.Sprintf("the service at line %d", n.Line), serviceKeys, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			sp.Name, err = scalar(v, key)
		case "tenant":
			sp.Tenant, err = scalar(v, key)
		case "vcluster":
			sp.VCluster, err = scalar(v, key)
		case "qos":
			sp.QOS, err = scalar(v, key)
		case "priority_class":
			sp.PriorityClass, err = integer(v, key)
		case "min_nodes":
			sp.MinNodes, err = integer(v, key)
		case "max_nodes":
			sp.MaxNodes, err = integer(v, key)
		case "scale_metric":
			sp.Metric, err = scalar(v, key)
		case "scale_target":
			var s string
			if s, err = scalar(v, key); err == nil {
				if sp.Target, err = strconv.ParseFloat(s, 64); err != nil {
					err = errAt(v.Line, "invalid scale_target %q: allowed a number > 0", s)
				}
			}
		case "scale_cooldown":
			sp.Cooldown, err = duration(v, key)
		case "scale_stabilization":
			sp.Stabilization, err = duration(v, key)
		case "drain_time":
			sp.DrainTime, err = duration(v, key)
		case "env":
			sp.Env, err = parseEnv(v)
		case "constraint":
			var s string
			if s, err = scalar(v, key); err == nil && s != "" {
				sp.Constraints = strings.Split(s, "&")
			}
		case "entrypoint":
			if v.Kind == yaml.SequenceNode {
				sp.Command, err = scalars(v, key)
			} else {
				var s string
				if s, err = scalar(v, key); err == nil && strings.TrimSpace(s) != "" {
					sp.Command = []string{"sh", "-c", s}
				}
			}
		}
		return err
	})
	if err != nil {
		return sp, err
	}
	if sp.Name == "" {
		return sp, errAt(n.Line, "a service needs a name")
	}
	if len(sp.Command) == 0 {
		return sp, errAt(n.Line, "service %q needs an entrypoint", sp.Name)
	}
	if sp.MinNodes < 1 {
		return sp, errAt(n.Line, "service %q: invalid min_nodes %d: allowed 1 or more", sp.Name, sp.MinNodes)
	}
	return sp, nil
}
