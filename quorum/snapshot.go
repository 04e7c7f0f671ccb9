package quorum

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/latticehpc/lattice/model"
)

// Snapshots (and backups) are a stream of typed JSON records, one per line,
// in a fixed order — header, meta, vclusters, tenants, members, nodes,
// shared scripts, allocations, DAGs, services, remembered requests, the history of
// ended jobs ("ended", in end order: history.go) — ending with a SHA-256 checksum of every
// byte before it. The same state always gives the same bytes.
//
// An array's tasks share one request: its script and environment are
// written once, in a "script" record keyed by the array's id, and each task
// that carries the same refers to it ("shared"). Streams written before
// this have no such records and load as they are.

const snapshotFormat = 1

type record struct {
	Kind       string            `json:"kind"`
	Format     int               `json:"format,omitempty"`
	Level      Level             `json:"level,omitempty"` // header: State.level
	Meta       *snapMeta         `json:"meta,omitempty"`
	VCluster   *model.VCluster   `json:"vcluster,omitempty"`
	Tenant     *model.Tenant     `json:"tenant,omitempty"`
	Member     *Member           `json:"member,omitempty"`
	Node       *model.Node       `json:"node,omitempty"`
	Allocation *model.Allocation `json:"allocation,omitempty"`
	DAG        *model.DAG        `json:"dag,omitempty"`
	Service    *model.Service    `json:"service,omitempty"`
	RequestID  string            `json:"request_id,omitempty"`
	Result     *Result           `json:"result,omitempty"`
	Ended      *HistoryRecord    `json:"ended,omitempty"`
	Records    int               `json:"records,omitempty"`
	// Shared is the array id whose "script" record holds this
	// allocation's script and environment; ScriptOf keys a script record.
	Shared   uint64   `json:"shared,omitempty"`
	ScriptOf uint64   `json:"script_of,omitempty"`
	Script   string   `json:"script,omitempty"`
	Env      []string `json:"env,omitempty"`
	SHA256   string   `json:"sha256,omitempty"`
	User     *User    `json:"user,omitempty"`
	Token    *Token   `json:"token,omitempty"`
}

type snapMeta struct {
	Version          uint64 `json:"version"`
	NextID           uint64 `json:"next_id"`
	DefaultVCluster  string `json:"default_vcluster,omitempty"`
	PowerBudgetWatts int64  `json:"power_budget_watts,omitempty"`
	DirtyAt          uint64 `json:"dirty_at,omitempty"`
	// QOS is the site's QOS table when it was ever set (nil = defaults).
	QOS        []model.QOS       `json:"qos,omitempty"`
	QOSSet     bool              `json:"qos_set,omitempty"`
	Partitions map[string]string `json:"partitions,omitempty"`
	ClusterID  string            `json:"cluster_id,omitempty"`
	// Reservations are the node reservations (reservation.go).
	Reservations []*model.Reservation `json:"reservations,omitempty"`
}

// image is a point-in-time copy of the state's references.
type image struct {
	level     Level
	meta      snapMeta
	vclusters []*model.VCluster
	tenants   []*model.Tenant
	members   []Member
	nodes     []*model.Node
	allocs    []*model.Allocation
	// views, when set, hold every allocation instead of allocs: the lists
	// the state shares (pending by vCluster, active, ended), merged in id
	// order by write, after the read lock.
	views    []AllocView
	dags     []*model.DAG
	services []*model.Service
	requests []string
	results  []*Result
	// ended is the history (history.go), in end order: records and the
	// slice's elements are never written once added.
	ended  []*HistoryRecord
	users  []*User
	tokens []*Token
}

func (s *State) image() *image {
	im := &image{
		level: s.level,
		meta: snapMeta{Version: s.Version, NextID: s.NextID, DefaultVCluster: s.DefaultVCluster,
			PowerBudgetWatts: s.PowerBudgetWatts, DirtyAt: s.dirtyAt,
			QOS: slices.Clone(s.qos), QOSSet: s.qos != nil, Partitions: s.Partitions(), ClusterID: s.clusterID,
			Reservations: s.reservations},
		vclusters: s.VClusters(),
		tenants:   s.Tenants(),
		members:   s.Members(),
		nodes:     s.NodesShared(),
		views:     s.allocViews(),
		dags:      s.DAGs(),
		services:  s.Services(),
		requests:  slices.Clone(s.requestOrder),
		ended:     slices.Clip(s.hist.recs),
		users:     s.Users(),
		tokens:    s.Tokens(),
	}
	if im.views == nil {
		im.allocs = s.Allocations()
	}
	im.results = make([]*Result, len(im.requests))
	for i, id := range im.requests {
		im.results[i] = s.requests[id]
	}
	return im
}

// allocViews returns views of every allocation the state holds — its
// pending lists, the active and the ended ones — so that a snapshot takes
// them without copying or sorting 100,000 allocations under the read lock;
// nil when they do not add up to every allocation (an allocation between
// those states, which no command leaves behind).
func (s *State) allocViews() []AllocView {
	vcs := make([]string, 0, len(s.idx.pending))
	for vc := range s.idx.pending {
		vcs = append(vcs, vc)
	}
	slices.Sort(vcs)
	views := make([]AllocView, 0, len(vcs)+2)
	n := 0
	for _, vc := range vcs {
		views = append(views, s.idx.pending[vc].Share())
		n += views[len(views)-1].Len()
	}
	views = append(views, s.idx.active.Share(), s.idx.ended.Share())
	n += s.idx.active.Len() + s.idx.ended.Len()
	if n != len(s.allocs) {
		return nil
	}
	return views
}

// mergeViews merges views, each in id order and disjoint, into one list in
// id order.
func mergeViews(views []AllocView) []*model.Allocation {
	n := 0
	for _, v := range views {
		n += v.Len()
	}
	out := make([]*model.Allocation, 0, n)
	type cursor struct{ c, i int }
	at := make([]cursor, len(views))
	for len(out) < n {
		best, bestID := -1, uint64(0)
		for k, v := range views {
			cur := at[k]
			if cur.c == len(v.chunks) {
				continue
			}
			if id := v.chunks[cur.c].ids[cur.i]; best < 0 || id < bestID {
				best, bestID = k, id
			}
		}
		cur := &at[best]
		// Take the run of this view below every other view's next id.
		limit := ^uint64(0)
		for k, v := range views {
			if k != best && at[k].c < len(v.chunks) {
				limit = min(limit, v.chunks[at[k].c].ids[at[k].i])
			}
		}
		for cur.c < len(views[best].chunks) {
			ch := views[best].chunks[cur.c]
			j := cur.i
			for j < len(ch.ids) && ch.ids[j] < limit {
				j++
			}
			out = append(out, ch.allocs[cur.i:j]...)
			if j < len(ch.ids) {
				cur.i = j
				break
			}
			cur.c, cur.i = cur.c+1, 0
		}
	}
	return out
}

// WriteSnapshot writes the state's snapshot stream to w.
func (s *State) WriteSnapshot(w io.Writer) error { return s.image().write(w) }

func (im *image) write(w io.Writer) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	n := 0
	put := func(r record) error {
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("snapshot record %s: %w", r.Kind, err)
		}
		b = append(b, '\n')
		n++
		_, err = bw.Write(b)
		return err
	}
	if err := put(record{Kind: "header", Format: snapshotFormat, Level: im.level}); err != nil {
		return err
	}
	if err := put(record{Kind: "meta", Meta: &im.meta}); err != nil {
		return err
	}
	for _, v := range im.vclusters {
		if err := put(record{Kind: "vcluster", VCluster: v}); err != nil {
			return err
		}
	}
	for _, t := range im.tenants {
		if err := put(record{Kind: "tenant", Tenant: t}); err != nil {
			return err
		}
	}
	for i := range im.members {
		if err := put(record{Kind: "member", Member: &im.members[i]}); err != nil {
			return err
		}
	}
	for _, u := range im.users {
		if err := put(record{Kind: "user", User: u}); err != nil {
			return err
		}
	}
	for _, t := range im.tokens {
		if err := put(record{Kind: "token", Token: t}); err != nil {
			return err
		}
	}
	for _, nd := range im.nodes {
		if err := put(record{Kind: "node", Node: nd}); err != nil {
			return err
		}
	}
	if im.views != nil {
		im.allocs, im.views = mergeViews(im.views), nil
	}
	shared := sharedRequests(im.allocs)
	for _, id := range slices.Sorted(maps.Keys(shared)) {
		sr := shared[id]
		if err := put(record{Kind: "script", ScriptOf: id, Script: sr.Script, Env: sr.Env}); err != nil {
			return err
		}
	}
	for _, a := range im.allocs {
		rec := record{Kind: "allocation", Allocation: a}
		if sr, ok := shared[a.ArrayJobID]; ok && a.ArrayJobID != 0 && sr.same(a) {
			c := *a
			c.Script, c.Env = "", nil
			rec.Allocation, rec.Shared = &c, a.ArrayJobID
		}
		if err := put(rec); err != nil {
			return err
		}
	}
	for _, d := range im.dags {
		if err := put(record{Kind: "dag", DAG: d}); err != nil {
			return err
		}
	}
	for _, v := range im.services {
		if err := put(record{Kind: "service", Service: v}); err != nil {
			return err
		}
	}
	for i, id := range im.requests {
		if err := put(record{Kind: "request", RequestID: id, Result: im.results[i]}); err != nil {
			return err
		}
	}
	for _, r := range im.ended {
		if err := put(record{Kind: "ended", Ended: r}); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	b, _ := json.Marshal(record{Kind: "checksum", Records: n, SHA256: sum})
	_, err := w.Write(append(b, '\n'))
	return err
}

// sharedRequest is the script and environment an array's tasks share.
type sharedRequest struct {
	Script string
	Env    []string
}

func (sr sharedRequest) same(a *model.Allocation) bool {
	return a.Script == sr.Script && slices.Equal(a.Env, sr.Env)
}

// sharedRequests picks, per array with a script or an environment, the one
// its first retained task carries, when at least two tasks carry it.
func sharedRequests(allocs []*model.Allocation) map[uint64]sharedRequest {
	out := map[uint64]sharedRequest{}
	count := map[uint64]int{}
	for _, a := range allocs { // id order: the first retained task comes first
		if a.ArrayJobID == 0 || (a.Script == "" && len(a.Env) == 0) {
			continue
		}
		sr, ok := out[a.ArrayJobID]
		if !ok {
			out[a.ArrayJobID] = sharedRequest{Script: a.Script, Env: a.Env}
			count[a.ArrayJobID] = 1
		} else if sr.same(a) {
			count[a.ArrayJobID]++
		}
	}
	for id, n := range count {
		if n < 2 {
			delete(out, id)
		}
	}
	return out
}

// ErrCorrupt marks a snapshot or backup that fails its checks.
var ErrCorrupt = errors.New("corrupt snapshot")

// ErrNewerFormat: the data was written by a newer latticed (a snapshot
// format or feature level, or a log entry, this build does not know).
var ErrNewerFormat = errors.New("written by a newer latticed")

// checkSnapshotHeader refuses a snapshot this build cannot read exactly.
func checkSnapshotHeader(rec *record) error {
	switch {
	case rec.Format > snapshotFormat:
		return fmt.Errorf("%w: snapshot format %d, this latticed (%s) reads format %d", ErrNewerFormat, rec.Format, Build(), snapshotFormat)
	case rec.Format != snapshotFormat:
		return fmt.Errorf("%w: snapshot format %d, this build reads %d", ErrCorrupt, rec.Format, snapshotFormat)
	case rec.Level > FeatureLevel:
		return fmt.Errorf("%w: snapshot of feature level %d, this latticed (%s) knows level %d", ErrNewerFormat, rec.Level, Build(), FeatureLevel)
	}
	return nil
}

// ReadSnapshot reads a stream written by WriteSnapshot into a fresh state,
// verifying its checksum and structure.
func ReadSnapshot(r io.Reader) (*State, error) {
	s := NewState()
	shared := map[uint64]sharedRequest{}
	h := sha256.New()
	br := bufio.NewReaderSize(r, 256<<10)
	n := 0
	sawHeader, sawChecksum := false, false
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read snapshot line %d: %w", line, err)
		}
		if sawChecksum {
			return nil, fmt.Errorf("%w: data after the checksum at line %d", ErrCorrupt, line)
		}
		var rec record
		if jerr := json.Unmarshal(b, &rec); jerr != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrCorrupt, line, jerr)
		}
		if rec.Kind == "checksum" {
			if got := hex.EncodeToString(h.Sum(nil)); got != rec.SHA256 || rec.Records != n {
				return nil, fmt.Errorf("%w: checksum mismatch (%d records, sha256 %s; trailer says %d, %s)", ErrCorrupt, n, got, rec.Records, rec.SHA256)
			}
			sawChecksum = true
			continue
		}
		h.Write(b)
		n++
		if err := s.load(&rec, line, &sawHeader, shared); err != nil {
			return nil, err
		}
	}
	if !sawHeader || !sawChecksum {
		return nil, fmt.Errorf("%w: truncated (header %v, checksum %v)", ErrCorrupt, sawHeader, sawChecksum)
	}
	s.rebuildIndexes()
	return s, nil
}

func (s *State) load(rec *record, line int, sawHeader *bool, shared map[uint64]sharedRequest) error {
	missing := func() error { return fmt.Errorf("%w: line %d: %s record without body", ErrCorrupt, line, rec.Kind) }
	if !*sawHeader && rec.Kind != "header" {
		return fmt.Errorf("%w: line %d: expected header, got %q", ErrCorrupt, line, rec.Kind)
	}
	switch rec.Kind {
	case "header":
		if err := checkSnapshotHeader(rec); err != nil {
			return err
		}
		s.level = rec.Level
		*sawHeader = true
	case "meta":
		if rec.Meta == nil {
			return missing()
		}
		s.Version, s.NextID = rec.Meta.Version, rec.Meta.NextID
		s.DefaultVCluster, s.PowerBudgetWatts = rec.Meta.DefaultVCluster, rec.Meta.PowerBudgetWatts
		s.dirtyAt = rec.Meta.DirtyAt
		if rec.Meta.QOSSet {
			s.qos = slices.Clone(rec.Meta.QOS)
			if s.qos == nil {
				s.qos = []model.QOS{}
			}
		}
		if len(rec.Meta.Partitions) > 0 {
			s.partitions = rec.Meta.Partitions
		}
		s.clusterID = rec.Meta.ClusterID
		s.reservations = rec.Meta.Reservations
	case "vcluster":
		if rec.VCluster == nil {
			return missing()
		}
		s.vclusters[rec.VCluster.Name] = rec.VCluster
	case "tenant":
		if rec.Tenant == nil {
			return missing()
		}
		s.tenants[rec.Tenant.Name] = rec.Tenant
	case "user", "token":
		return s.loadUserRecord(rec, missing)
	case "member":
		if rec.Member == nil {
			return missing()
		}
		s.members[rec.Member.ID] = *rec.Member
	case "node":
		if rec.Node == nil {
			return missing()
		}
		if _, dup := s.nodes[rec.Node.Name]; dup {
			return fmt.Errorf("%w: line %d: node %s twice", ErrCorrupt, line, rec.Node.Name)
		}
		s.nodes[rec.Node.Name] = rec.Node
		s.nodeNames = append(s.nodeNames, rec.Node.Name)
		if k := len(s.nodeNames); k > 1 && s.nodeNames[k-2] >= rec.Node.Name {
			return fmt.Errorf("%w: line %d: nodes out of order", ErrCorrupt, line)
		}
	case "allocation":
		if rec.Allocation == nil {
			return missing()
		}
		if _, dup := s.allocs[rec.Allocation.ID]; dup {
			return fmt.Errorf("%w: line %d: allocation %d twice", ErrCorrupt, line, rec.Allocation.ID)
		}
		if rec.Shared != 0 {
			sr, ok := shared[rec.Shared]
			if !ok || rec.Allocation.ArrayJobID != rec.Shared {
				return fmt.Errorf("%w: line %d: allocation %d shares the script of array %d, which has no script record", ErrCorrupt, line, rec.Allocation.ID, rec.Shared)
			}
			rec.Allocation.Script, rec.Allocation.Env = sr.Script, sr.Env
		}
		s.allocs[rec.Allocation.ID] = rec.Allocation
	case "script":
		if rec.ScriptOf == 0 {
			return missing()
		}
		shared[rec.ScriptOf] = sharedRequest{Script: rec.Script, Env: rec.Env}
	case "dag":
		if rec.DAG == nil {
			return missing()
		}
		if _, dup := s.dags[rec.DAG.ID]; dup {
			return fmt.Errorf("%w: line %d: DAG %d twice", ErrCorrupt, line, rec.DAG.ID)
		}
		s.dags[rec.DAG.ID] = rec.DAG
	case "service":
		if rec.Service == nil {
			return missing()
		}
		if s.services[rec.Service.Name] != nil {
			return fmt.Errorf("%w: line %d: service %s twice", ErrCorrupt, line, rec.Service.Name)
		}
		if s.services == nil {
			s.services = map[string]*model.Service{}
		}
		s.services[rec.Service.Name] = rec.Service
	case "request":
		if rec.Result == nil {
			return missing()
		}
		s.requests[rec.RequestID] = rec.Result
		s.requestOrder = append(s.requestOrder, rec.RequestID)
	case "ended":
		if rec.Ended == nil {
			return missing()
		}
		if n := len(s.hist.recs); n > 0 && !s.hist.recs[n-1].before(rec.Ended) {
			return fmt.Errorf("%w: line %d: ended job %d out of order", ErrCorrupt, line, rec.Ended.ID)
		}
		if _, live := s.allocs[rec.Ended.ID]; live {
			return fmt.Errorf("%w: line %d: job %d both live and ended", ErrCorrupt, line, rec.Ended.ID)
		}
		s.hist.recs = append(s.hist.recs, rec.Ended)
	default:
		return fmt.Errorf("%w: line %d: unknown record kind %q", ErrCorrupt, line, rec.Kind)
	}
	return nil
}

// VerifySnapshot reads a stream fully and reports whether it is intact,
// with a summary of what it holds.
func VerifySnapshot(r io.Reader) (Summary, error) {
	s, err := ReadSnapshot(r)
	if err != nil {
		return Summary{}, err
	}
	if v := CheckInvariants(s); len(v) > 0 {
		return Summary{}, fmt.Errorf("%w: %d invariant violations, first: %s", ErrCorrupt, len(v), v[0])
	}
	return Summary{Version: s.Version, Nodes: len(s.nodes), Allocations: len(s.allocs),
		VClusters: len(s.vclusters), Tenants: len(s.tenants), Ended: len(s.hist.recs)}, nil
}

// Summary describes a snapshot's contents.
type Summary struct {
	Version     uint64 `json:"version"`
	Nodes       int    `json:"nodes"`
	Allocations int    `json:"allocations"`
	VClusters   int    `json:"vclusters"`
	Tenants     int    `json:"tenants"`
	// Ended is how many ended jobs the history holds.
	Ended int `json:"ended,omitempty"`
}
