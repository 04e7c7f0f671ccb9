package model

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Services: long-running allocations of instances, one per node, that the
// leader keeps between a minimum and a maximum and scales on a metric the
// instances serve (docs/services.md). Each instance is an ordinary
// one-node allocation whose Service field names its service.

// DefaultServiceVCluster is where a service runs when it names no vCluster.
const DefaultServiceVCluster = "service"

// Service defaults and limits.
const (
	DefaultServiceCooldown      = time.Minute
	DefaultServiceStabilization = 5 * time.Minute
	DefaultServiceDrainTime     = 30 * time.Second
	MaxServiceNodes             = 10000
	MaxServiceDrainTime         = time.Hour
)

// Scaling directions (lattice_service_scaling_events_total{direction}).
const (
	ScaleUp   = "up"
	ScaleDown = "down"
)

// ReasonCrashLoopBackOff: the service's instances keep exiting; the next
// restart waits an exponentially growing delay (as Kubernetes says it).
const ReasonCrashLoopBackOff = "CrashLoopBackOff"

// ServiceSpec is what a user asks for when creating or updating a service.
type ServiceSpec struct {
	Name     string `json:"name"`
	Tenant   string `json:"tenant"`
	User     string `json:"user,omitempty"`
	VCluster string `json:"vcluster"`
	// QOS names a site QOS (its class becomes PriorityClass, its maximum
	// walltime the instances' walltime); PriorityClass is the class when
	// no QOS sets one.
	QOS           string `json:"qos,omitempty"`
	PriorityClass int    `json:"priority_class,omitempty"`
	MinNodes      int    `json:"min_nodes"`
	MaxNodes      int    `json:"max_nodes"`
	// Metric is the Prometheus series the instances serve on
	// /metrics; Target its per-instance target value. "" = no scaling:
	// the service stays at its minimum.
	Metric string  `json:"metric,omitempty"`
	Target float64 `json:"target,omitempty"`
	// Cooldown is the least time between two changes of the desired
	// count; Stabilization the window over which scale-down takes the
	// highest recommendation; DrainTime the SIGTERM→SIGKILL time of an
	// instance that is stopped.
	Cooldown      time.Duration `json:"cooldown"`
	Stabilization time.Duration `json:"stabilization"`
	DrainTime     time.Duration `json:"drain_time"`
	// Walltime bounds each instance's run: 0 = none (the instances run
	// until stopped), unless its QOS sets a maximum.
	Walltime    time.Duration `json:"walltime,omitempty"`
	Command     []string      `json:"command"`
	Env         []string      `json:"env,omitempty"`
	WorkDir     string        `json:"work_dir,omitempty"`
	Constraints []string      `json:"constraints,omitempty"`
}

// ServiceDecision is one change of a service's desired instance count.
type ServiceDecision struct {
	Time      time.Time `json:"time"`
	From      int       `json:"from"`
	To        int       `json:"to"`
	Direction string    `json:"direction"`
	Reason    string    `json:"reason"`
}

// Service is a service as the quorum holds it: its spec and what the
// leader's controller decided.
type Service struct {
	ServiceSpec
	CreateTime time.Time `json:"create_time"`
	// Desired is the instance count the controller keeps; LastChange when
	// it last changed (the cooldown counts from there, and from creation).
	Desired      int              `json:"desired"`
	LastChange   time.Time        `json:"last_change"`
	LastDecision *ServiceDecision `json:"last_decision,omitempty"`
	// Instances are the allocation ids of its instances not yet seen to
	// end by the controller, in id order.
	Instances []uint64 `json:"instances,omitempty"`
	// Restarts counts instances started again after one ended on its own
	// (exit, node failure); Failures counts such ends in a row that came
	// soon after their start; RestartAfter is when the next restart may
	// start (the back-off).
	Restarts     int       `json:"restarts,omitempty"`
	Failures     int       `json:"failures,omitempty"`
	RestartAfter time.Time `json:"restart_after,omitzero"`
	// Reason is why the service is not as desired (CrashLoopBackOff), with
	// ReasonDetail saying more; "" when it is fine.
	Reason       string `json:"reason,omitempty"`
	ReasonDetail string `json:"reason_detail,omitempty"`
}

// Clone returns a deep copy.
func (s *Service) Clone() *Service {
	c := *s
	c.Command = slices.Clone(s.Command)
	c.Env = slices.Clone(s.Env)
	c.Constraints = slices.Clone(s.Constraints)
	c.Instances = slices.Clone(s.Instances)
	if s.LastDecision != nil {
		d := *s.LastDecision
		c.LastDecision = &d
	}
	return &c
}

// ApplyDefaults fills the tenant, vCluster, cooldown, stabilization window
// and drain time a spec leaves out (negative: zero).
func (s *ServiceSpec) ApplyDefaults() {
	if s.Tenant == "" {
		s.Tenant = DefaultTenant
	}
	if s.VCluster == "" {
		s.VCluster = DefaultServiceVCluster
	}
	if s.MaxNodes == 0 {
		s.MaxNodes = s.MinNodes
	}
	if s.Cooldown == 0 {
		s.Cooldown = DefaultServiceCooldown
	}
	if s.Stabilization == 0 {
		s.Stabilization = DefaultServiceStabilization
	}
	if s.DrainTime == 0 {
		s.DrainTime = DefaultServiceDrainTime
	}
	for _, d := range []*time.Duration{&s.Cooldown, &s.Stabilization, &s.DrainTime} {
		if *d < 0 {
			*d = 0
		}
	}
	s.Constraints = NormalizeFeatures(slices.Clone(s.Constraints))
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Validate checks a spec (after ApplyDefaults).
func (s *ServiceSpec) Validate() error {
	if !validName(s.Name) || len(s.Name) > 100 {
		return fieldErr("name", s.Name, "1-100 letters, digits, '.', '-' and '_'")
	}
	if _, err := strconv.ParseUint(s.Name, 10, 64); err == nil {
		return fieldErr("name", s.Name, "a name that is not a number (numbers are allocation ids)")
	}
	if !validName(s.Tenant) {
		return fieldErr("tenant", s.Tenant, "letters, digits, '.', '-' and '_'")
	}
	if !validName(s.VCluster) {
		return fieldErr("vcluster", s.VCluster, "letters, digits, '.', '-' and '_'")
	}
	if s.MinNodes < 1 || s.MinNodes > MaxServiceNodes {
		return fieldErr("min-nodes", itoa(s.MinNodes), fmt.Sprintf("a node count 1..%d", MaxServiceNodes))
	}
	if s.MaxNodes < s.MinNodes || s.MaxNodes > MaxServiceNodes {
		return fieldErr("max-nodes", itoa(s.MaxNodes), fmt.Sprintf("a node count from --min-nodes (%d) to %d", s.MinNodes, MaxServiceNodes))
	}
	if s.Metric != "" && !metricName.MatchString(s.Metric) {
		return fieldErr("scale-metric", s.Metric, "a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
	}
	if s.Metric != "" && !(s.Target > 0) {
		return fieldErr("scale-target", strconv.FormatFloat(s.Target, 'g', -1, 64), "a number > 0 (the per-instance value of --scale-metric)")
	}
	if s.Metric == "" && s.Target != 0 {
		return fieldErr("scale-target", strconv.FormatFloat(s.Target, 'g', -1, 64), "only with --scale-metric")
	}
	if s.DrainTime > MaxServiceDrainTime {
		return fieldErr("drain-time", s.DrainTime.String(), "a duration of at most 1h")
	}
	if s.Walltime < 0 || s.Walltime > MaxWalltime {
		return fieldErr("walltime", s.Walltime.String(), "0 (none) or a duration of at most 365 days")
	}
	if s.PriorityClass < 0 || s.PriorityClass > MaxPriorityClass {
		return fieldErr("priority-class", itoa(s.PriorityClass), "an integer 0..10")
	}
	if s.QOS != "" && !validName(s.QOS) {
		return fieldErr("qos", s.QOS, "letters, digits, '.', '-' and '_'")
	}
	if len(s.Command) == 0 {
		return fieldErr("command", "", "a command after --")
	}
	// An instance is a one-node allocation of this request.
	r := s.InstanceRequest()
	r.ApplyDefaults()
	return r.Validate()
}

// InstanceRequest is the request of one instance: one node, the service's
// command, environment and class; no walltime (the longest allowed) unless
// the spec has one.
func (s *ServiceSpec) InstanceRequest() Request {
	wt := s.Walltime
	if wt == 0 {
		wt = MaxWalltime
	}
	return Request{
		Name: s.Name, Tenant: s.Tenant, User: s.User, VCluster: s.VCluster,
		Command: slices.Clone(s.Command), Env: slices.Clone(s.Env), WorkDir: s.WorkDir,
		NodesMin: 1, NodesMax: 1, Walltime: wt, PriorityClass: s.PriorityClass, QOS: s.QOS,
		Checkpoint: CheckpointNone, Constraints: slices.Clone(s.Constraints),
	}
}
