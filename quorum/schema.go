package quorum

import (
	"encoding/json"
	"fmt"
)

// The schema of the replicated log: every command type, its name, the
// feature level that introduced it, how its body is decoded and how it is
// applied — all in this one table. Snapshots are described in snapshot.go
// (format snapshotFormat); both are covered by DataFormat.
//
// # Adding a command
//
//  1. Take the next free value of your block below (never reuse or
//     renumber a value: a log written years ago still holds it).
//  2. Add its constant to the enum, its Type method, and one line to
//     commandTable: name, Since (the feature level of the release that
//     adds it: FeatureLevel, today Level1), New (an empty command to
//     decode into) and Apply.
//  3. Gate its use: before proposing it, the leader must know that every
//     member knows it (server: requireLevel with quorum.LevelOf(type), or
//     the level of a new field). An old member handed a command it does
//     not know stops (Decode fails, the FSM panics rather than diverge).
//  4. Apply must be deterministic (no clock, rand or map order) and apply
//     what the entry says: validation and defaulting belong before the
//     proposal; Apply re-checks only what never changes meaning.
//
// A new field of an existing command is gated the same way (the field's
// level, e.g. VClusterPatch fields): an old member decodes the entry but
// silently drops the field.

// CommandType is the first byte of every Raft log entry. The enum is
// append-only: a value, once used, keeps its meaning forever.
type CommandType uint8

// Command types. Blocks (an owner's range; unused values stay free for it):
//
//	1–19    core (submit, scheduling, nodes, vClusters, members)
//	20–27   job control and site configuration (hold, update, QOS, partitions)
//	28–31   batched submission
//	32–44   node facts and power measurements
//	45–49   the history of ended jobs
//	50–64   free
//	65–69   suspend and resume
//	70–79   users and tokens
//	80–84   rooms  (server/ split into rpc/, admission/, leader/)
//	85–89   r24    (issue 24)
//	90–99   upg    (rolling upgrades)
//	100–104 r27    (reservations, hostlists)
//	105–109 cost   (Slurm command costs)
//	110–114 pre    (preemption policy, gang suspend)
//	115–119 svc    (services that scale themselves)
//	120–124 sq     (scheduling quality, fairness)
//	125–255 free: take a block of five for a new topic and write it here
const (
	CmdSubmit         CommandType = 1
	CmdAssignBatch    CommandType = 2
	CmdUpdateAllocs   CommandType = 3
	CmdCancel         CommandType = 4
	CmdRegisterNodes  CommandType = 5
	CmdSetNodeState   CommandType = 6
	CmdSetVCluster    CommandType = 7
	CmdSetTenant      CommandType = 8
	CmdSetPowerBudget CommandType = 9
	CmdRequeue        CommandType = 10
	CmdReturnNodes    CommandType = 11
	CmdReclaim        CommandType = 12
	CmdPrune          CommandType = 13
	CmdSetMember      CommandType = 14
	CmdRemoveMember   CommandType = 15
	CmdSetDefaults    CommandType = 16
	CmdPreempt        CommandType = 17
	CmdCheckpoint     CommandType = 18
	CmdStep           CommandType = 19

	CmdHold         CommandType = 20
	CmdUpdateAlloc  CommandType = 21
	CmdRequeueJobs  CommandType = 22
	CmdSetQOS       CommandType = 23
	CmdSetPartition CommandType = 24

	CmdSubmitBatch CommandType = 28

	CmdNodeFacts CommandType = 32
	CmdNodePower CommandType = 33

	CmdArchiveEnded CommandType = 45

	CmdSuspendJob CommandType = 65

	// 110–114: pre.

	// CmdResumeSuspended ends suspensions by preemption (gang.go).
	CmdResumeSuspended CommandType = 110
	// CmdRecordUsage records a stopped run's usage (usage_runs.go).
	CmdRecordUsage CommandType = 111

	CmdSetUser      CommandType = 70
	CmdDeleteUser   CommandType = 71
	CmdDeleteTenant CommandType = 72
	CmdPutTokens    CommandType = 73
	CmdRevokeTokens CommandType = 74

	// 85–89: r24.

	// CmdSetClusterID names the cluster, once (clusterid.go).
	CmdSetClusterID CommandType = 85

	// 90–99: upg.

	// CmdPatchVCluster changes the named fields of one vCluster.
	CmdPatchVCluster CommandType = 90

	// 100–104: r27 (node reservations, reservation.go).
	CmdSetReservation    CommandType = 100
	CmdDeleteReservation CommandType = 101

	// 115–119: svc (services.go).
	CmdSetService    CommandType = 115
	CmdDeleteService CommandType = 116
	CmdScaleService  CommandType = 117
)

// Level is a feature level: what a release of latticed knows of the log
// (command types and fields). Releases before levels existed advertise
// none and count as LevelBase.
type Level uint32

// Feature levels, one per release that adds to the log.
const (
	// LevelBase: every command of release 38e3d33 and before.
	LevelBase Level = 0
	// Level1: the release that advertises levels (this one): command
	// PatchVCluster, and every command added in the same release.
	Level1 Level = 1
)

// FeatureLevel is the level this build knows and advertises. Raise it
// (and add a LevelN) in the first change of a release that adds a command
// type or a field older members would drop.
const FeatureLevel = Level1

// commandSpec is one row of the schema.
type commandSpec struct {
	name  string
	since Level
	// new returns an empty command for a JSON body; decode, when set,
	// parses a binary body instead (codec.go).
	new    func() Command
	decode func(body []byte) (Command, error)
	apply  func(s *State, c Command) *Result
}

// commandTable is the schema: every command type, once.
var commandTable = map[CommandType]commandSpec{
	CmdSubmit: {name: "submit", new: func() Command { return &Submit{} },
		apply: func(s *State, c Command) *Result { return s.applySubmit(c.(*Submit)) }},
	CmdAssignBatch: {name: "assign_batch",
		decode: func(b []byte) (Command, error) { return decodeAssignBatch(b) },
		apply:  func(s *State, c Command) *Result { return s.applyAssignBatch(c.(*AssignBatch)) }},
	CmdUpdateAllocs: {name: "update_allocs",
		decode: func(b []byte) (Command, error) { return decodeUpdateAllocs(b) },
		apply:  func(s *State, c Command) *Result { return s.applyUpdateAllocs(c.(*UpdateAllocs)) }},
	CmdCancel: {name: "cancel", new: func() Command { return &Cancel{} },
		apply: func(s *State, c Command) *Result { return s.applyCancel(c.(*Cancel)) }},
	CmdRegisterNodes: {name: "register_nodes", new: func() Command { return &RegisterNodes{} },
		apply: func(s *State, c Command) *Result { return s.applyRegisterNodes(c.(*RegisterNodes)) }},
	CmdSetNodeState: {name: "set_node_state", new: func() Command { return &SetNodeState{} },
		apply: func(s *State, c Command) *Result { return s.applySetNodeState(c.(*SetNodeState)) }},
	CmdSetVCluster: {name: "set_vcluster", new: func() Command { return &SetVCluster{} },
		apply: func(s *State, c Command) *Result { return s.applySetVCluster(c.(*SetVCluster)) }},
	CmdSetTenant: {name: "set_tenant", new: func() Command { return &SetTenant{} },
		apply: func(s *State, c Command) *Result { return s.applySetTenant(c.(*SetTenant)) }},
	CmdSetPowerBudget: {name: "set_power_budget", new: func() Command { return &SetPowerBudget{} },
		apply: func(s *State, c Command) *Result { return s.applySetPowerBudget(c.(*SetPowerBudget)) }},
	CmdRequeue: {name: "requeue", new: func() Command { return &Requeue{} },
		apply: func(s *State, c Command) *Result { return s.applyRequeue(c.(*Requeue)) }},
	CmdReturnNodes: {name: "return_nodes", new: func() Command { return &ReturnNodes{} },
		apply: func(s *State, c Command) *Result { return s.applyReturnNodes(c.(*ReturnNodes)) }},
	CmdReclaim: {name: "reclaim", new: func() Command { return &Reclaim{} },
		apply: func(s *State, c Command) *Result { return s.applyReclaim(c.(*Reclaim)) }},
	CmdPrune: {name: "prune", new: func() Command { return &Prune{} },
		apply: func(s *State, c Command) *Result { return s.applyPrune(c.(*Prune)) }},
	CmdSetMember: {name: "set_member", new: func() Command { return &SetMember{} },
		apply: func(s *State, c Command) *Result { return s.applySetMember(c.(*SetMember)) }},
	CmdRemoveMember: {name: "remove_member", new: func() Command { return &RemoveMember{} },
		apply: func(s *State, c Command) *Result { return s.applyRemoveMember(c.(*RemoveMember)) }},
	CmdSetDefaults: {name: "set_defaults", new: func() Command { return &SetDefaults{} },
		apply: func(s *State, c Command) *Result { return s.applySetDefaults(c.(*SetDefaults)) }},
	CmdPreempt: {name: "preempt", new: func() Command { return &Preempt{} },
		apply: func(s *State, c Command) *Result { return s.applyPreempt(c.(*Preempt)) }},
	CmdCheckpoint: {name: "checkpoint", new: func() Command { return &Checkpoint{} },
		apply: func(s *State, c Command) *Result { return s.applyCheckpoint(c.(*Checkpoint)) }},
	CmdStep: {name: "step", new: func() Command { return &StepCommand{} },
		apply: func(s *State, c Command) *Result { return s.applyStep(c.(*StepCommand)) }},

	CmdHold: {name: "hold", new: func() Command { return &Hold{} },
		apply: func(s *State, c Command) *Result { return s.applyHold(c.(*Hold)) }},
	CmdUpdateAlloc: {name: "update_alloc", new: func() Command { return &UpdateAlloc{} },
		apply: func(s *State, c Command) *Result { return s.applyUpdateAlloc(c.(*UpdateAlloc)) }},
	CmdRequeueJobs: {name: "requeue_jobs", new: func() Command { return &RequeueJobs{} },
		apply: func(s *State, c Command) *Result { return s.applyRequeueJobs(c.(*RequeueJobs)) }},
	CmdSetQOS: {name: "set_qos", new: func() Command { return &SetQOS{} },
		apply: func(s *State, c Command) *Result { return s.applySetQOS(c.(*SetQOS)) }},
	CmdSetPartition: {name: "set_partition", new: func() Command { return &SetPartition{} },
		apply: func(s *State, c Command) *Result { return s.applySetPartition(c.(*SetPartition)) }},

	CmdSubmitBatch: {name: "submit_batch", new: func() Command { return &SubmitBatch{} },
		apply: func(s *State, c Command) *Result { return s.applySubmitBatch(c.(*SubmitBatch)) }},

	CmdNodeFacts: {name: "node_facts", new: func() Command { return &NodeFacts{} },
		apply: func(s *State, c Command) *Result { return s.applyNodeFacts(c.(*NodeFacts)) }},
	CmdNodePower: {name: "node_power", new: func() Command { return &NodePower{} },
		apply: func(s *State, c Command) *Result { return s.applyNodePower(c.(*NodePower)) }},

	CmdArchiveEnded: {name: "archive_ended", new: func() Command { return &ArchiveEnded{} },
		apply: func(s *State, c Command) *Result { return s.applyArchiveEnded(c.(*ArchiveEnded)) }},

	CmdSuspendJob: {name: "suspend_job", new: func() Command { return &SuspendJob{} },
		apply: func(s *State, c Command) *Result { return s.applySuspendJob(c.(*SuspendJob)) }},

	CmdSetUser: {name: "set_user", new: func() Command { return &SetUser{} },
		apply: func(s *State, c Command) *Result { return s.applySetUser(c.(*SetUser)) }},
	CmdDeleteUser: {name: "delete_user", new: func() Command { return &DeleteUser{} },
		apply: func(s *State, c Command) *Result { return s.applyDeleteUser(c.(*DeleteUser)) }},
	CmdDeleteTenant: {name: "delete_tenant", new: func() Command { return &DeleteTenant{} },
		apply: func(s *State, c Command) *Result { return s.applyDeleteTenant(c.(*DeleteTenant)) }},
	CmdPutTokens: {name: "put_tokens", new: func() Command { return &PutTokens{} },
		apply: func(s *State, c Command) *Result { return s.applyPutTokens(c.(*PutTokens)) }},
	CmdRevokeTokens: {name: "revoke_tokens", new: func() Command { return &RevokeTokens{} },
		apply: func(s *State, c Command) *Result { return s.applyRevokeTokens(c.(*RevokeTokens)) }},

	CmdSetClusterID: {name: "set_cluster_id", since: Level1, new: func() Command { return &SetClusterID{} },
		apply: func(s *State, c Command) *Result { return s.applySetClusterID(c.(*SetClusterID)) }},

	CmdPatchVCluster: {name: "patch_vcluster", since: Level1, new: func() Command { return &PatchVCluster{} },
		apply: func(s *State, c Command) *Result { return s.applyPatchVCluster(c.(*PatchVCluster)) }},

	CmdSetReservation: {name: "set_reservation", since: Level1, new: func() Command { return &SetReservation{} },
		apply: func(s *State, c Command) *Result { return s.applySetReservation(c.(*SetReservation)) }},
	CmdDeleteReservation: {name: "delete_reservation", since: Level1, new: func() Command { return &DeleteReservation{} },
		apply: func(s *State, c Command) *Result { return s.applyDeleteReservation(c.(*DeleteReservation)) }},

	CmdResumeSuspended: {name: "resume_suspended", since: Level1, new: func() Command { return &ResumeSuspended{} },
		apply: func(s *State, c Command) *Result { return s.applyResumeSuspended(c.(*ResumeSuspended)) }},

	CmdRecordUsage: {name: "record_usage", since: Level1, new: func() Command { return &RecordUsage{} },
		apply: func(s *State, c Command) *Result { return s.applyRecordUsage(c.(*RecordUsage)) }},

	CmdSetService: {name: "set_service", since: Level1, new: func() Command { return &SetService{} },
		apply: func(s *State, c Command) *Result { return s.applySetService(c.(*SetService)) }},
	CmdDeleteService: {name: "delete_service", since: Level1, new: func() Command { return &DeleteService{} },
		apply: func(s *State, c Command) *Result { return s.applyDeleteService(c.(*DeleteService)) }},
	CmdScaleService: {name: "scale_service", since: Level1, new: func() Command { return &ScaleService{} },
		apply: func(s *State, c Command) *Result { return s.applyScaleService(c.(*ScaleService)) }},
}

func (*Submit) Type() CommandType            { return CmdSubmit }
func (*AssignBatch) Type() CommandType       { return CmdAssignBatch }
func (*UpdateAllocs) Type() CommandType      { return CmdUpdateAllocs }
func (*Cancel) Type() CommandType            { return CmdCancel }
func (*RegisterNodes) Type() CommandType     { return CmdRegisterNodes }
func (*SetNodeState) Type() CommandType      { return CmdSetNodeState }
func (*SetVCluster) Type() CommandType       { return CmdSetVCluster }
func (*SetTenant) Type() CommandType         { return CmdSetTenant }
func (*SetPowerBudget) Type() CommandType    { return CmdSetPowerBudget }
func (*Requeue) Type() CommandType           { return CmdRequeue }
func (*ReturnNodes) Type() CommandType       { return CmdReturnNodes }
func (*Reclaim) Type() CommandType           { return CmdReclaim }
func (*Prune) Type() CommandType             { return CmdPrune }
func (*SetMember) Type() CommandType         { return CmdSetMember }
func (*RemoveMember) Type() CommandType      { return CmdRemoveMember }
func (*SetDefaults) Type() CommandType       { return CmdSetDefaults }
func (*Preempt) Type() CommandType           { return CmdPreempt }
func (*Checkpoint) Type() CommandType        { return CmdCheckpoint }
func (*StepCommand) Type() CommandType       { return CmdStep }
func (*Hold) Type() CommandType              { return CmdHold }
func (*UpdateAlloc) Type() CommandType       { return CmdUpdateAlloc }
func (*RequeueJobs) Type() CommandType       { return CmdRequeueJobs }
func (*SetQOS) Type() CommandType            { return CmdSetQOS }
func (*SetPartition) Type() CommandType      { return CmdSetPartition }
func (*SubmitBatch) Type() CommandType       { return CmdSubmitBatch }
func (*NodeFacts) Type() CommandType         { return CmdNodeFacts }
func (*NodePower) Type() CommandType         { return CmdNodePower }
func (*ArchiveEnded) Type() CommandType      { return CmdArchiveEnded }
func (*SuspendJob) Type() CommandType        { return CmdSuspendJob }
func (*ResumeSuspended) Type() CommandType   { return CmdResumeSuspended }
func (*RecordUsage) Type() CommandType       { return CmdRecordUsage }
func (*SetUser) Type() CommandType           { return CmdSetUser }
func (*DeleteUser) Type() CommandType        { return CmdDeleteUser }
func (*DeleteTenant) Type() CommandType      { return CmdDeleteTenant }
func (*PutTokens) Type() CommandType         { return CmdPutTokens }
func (*RevokeTokens) Type() CommandType      { return CmdRevokeTokens }
func (*SetClusterID) Type() CommandType      { return CmdSetClusterID }
func (*PatchVCluster) Type() CommandType     { return CmdPatchVCluster }
func (*SetService) Type() CommandType        { return CmdSetService }
func (*DeleteService) Type() CommandType     { return CmdDeleteService }
func (*ScaleService) Type() CommandType      { return CmdScaleService }
func (*SetReservation) Type() CommandType    { return CmdSetReservation }
func (*DeleteReservation) Type() CommandType { return CmdDeleteReservation }

func (t CommandType) String() string {
	if spec, ok := commandTable[t]; ok {
		return spec.name
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Known reports whether this build knows command type t.
func (t CommandType) Known() bool {
	_, ok := commandTable[t]
	return ok
}

// LevelOf is the feature level a member needs to apply command type t
// (FeatureLevel+1 for a type this build does not know).
func LevelOf(t CommandType) Level {
	if spec, ok := commandTable[t]; ok {
		return spec.since
	}
	return FeatureLevel + 1
}

// Decode parses an entry written by Encode.
func Decode(data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("decode: empty entry")
	}
	t := CommandType(data[0])
	spec, ok := commandTable[t]
	if !ok {
		return nil, fmt.Errorf("decode: unknown command type %d: written by a newer latticed (this one knows feature level %d); upgrade this member", data[0], FeatureLevel)
	}
	if spec.decode != nil {
		c, err := spec.decode(data[1:])
		if err != nil {
			return nil, fmt.Errorf("decode %s: %w", t, err)
		}
		return c, nil
	}
	c := spec.new()
	if err := json.Unmarshal(data[1:], c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", t, err)
	}
	return c, nil
}

// dispatch applies a decoded command through its row of the schema.
func (s *State) dispatch(c Command) *Result {
	spec, ok := commandTable[c.Type()]
	if !ok {
		panic(fmt.Sprintf("quorum: no applier for %T", c))
	}
	return spec.apply(s, c)
}
