package quorum

import (
	"errors"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// ErrPartitioned is what a fault-injected link answers.
var ErrPartitioned = errors.New("link cut by fault injection")

// FaultTransport wraps a Raft transport and drops all Raft traffic to and
// from blocked peers, in both directions — a network partition for tests,
// without network namespaces. Enabled only with `latticed server
// --fault-injection`; production members never wrap their transport.
type FaultTransport struct {
	inner    raft.Transport
	mu       sync.RWMutex
	blocked  map[raft.ServerID]bool
	consumer chan raft.RPC
	stop     chan struct{}
	once     sync.Once
}

// NewFaultTransport wraps inner.
func NewFaultTransport(inner raft.Transport) *FaultTransport {
	f := &FaultTransport{inner: inner, blocked: map[raft.ServerID]bool{}, consumer: make(chan raft.RPC), stop: make(chan struct{})}
	go f.pump()
	return f
}

// Block cuts the links to the given members; an empty list heals everything.
func (f *FaultTransport) Block(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked = map[raft.ServerID]bool{}
	for _, id := range ids {
		f.blocked[raft.ServerID(id)] = true
	}
}

// Blocked reports whether the link to id is cut.
func (f *FaultTransport) Blocked(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.blocked[raft.ServerID(id)]
}

func (f *FaultTransport) blockedHeader(h raft.RPCHeader) bool {
	return f.Blocked(string(h.ID))
}

func (f *FaultTransport) fromBlocked(rpc raft.RPC) bool {
	switch c := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		return f.blockedHeader(c.RPCHeader)
	case *raft.RequestVoteRequest:
		return f.blockedHeader(c.RPCHeader)
	case *raft.RequestPreVoteRequest:
		return f.blockedHeader(c.RPCHeader)
	case *raft.InstallSnapshotRequest:
		return f.blockedHeader(c.RPCHeader)
	case *raft.TimeoutNowRequest:
		return f.blockedHeader(c.RPCHeader)
	}
	return false
}

func (f *FaultTransport) pump() {
	for {
		select {
		case <-f.stop:
			return
		case rpc := <-f.inner.Consumer():
			if f.fromBlocked(rpc) {
				if rpc.Reader != nil {
					_, _ = io.Copy(io.Discard, rpc.Reader)
				}
				rpc.Respond(nil, ErrPartitioned)
				continue
			}
			select {
			case f.consumer <- rpc:
			case <-f.stop:
				return
			}
		}
	}
}

// Consumer implements raft.Transport.
func (f *FaultTransport) Consumer() <-chan raft.RPC { return f.consumer }

// LocalAddr implements raft.Transport.
func (f *FaultTransport) LocalAddr() raft.ServerAddress { return f.inner.LocalAddr() }

// AppendEntriesPipeline implements raft.Transport.
func (f *FaultTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if f.Blocked(string(id)) {
		return nil, ErrPartitioned
	}
	p, err := f.inner.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return &faultPipeline{AppendPipeline: p, f: f, id: string(id)}, nil
}

type faultPipeline struct {
	raft.AppendPipeline
	f  *FaultTransport
	id string
}

func (p *faultPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if p.f.Blocked(p.id) {
		return nil, ErrPartitioned
	}
	return p.AppendPipeline.AppendEntries(args, resp)
}

// AppendEntries implements raft.Transport.
func (f *FaultTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if f.Blocked(string(id)) {
		return ErrPartitioned
	}
	return f.inner.AppendEntries(id, target, args, resp)
}

// RequestVote implements raft.Transport.
func (f *FaultTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if f.Blocked(string(id)) {
		return ErrPartitioned
	}
	return f.inner.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (f *FaultTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if f.Blocked(string(id)) {
		return ErrPartitioned
	}
	pv, ok := f.inner.(raft.WithPreVote)
	if !ok {
		return errors.New("transport does not support pre-vote")
	}
	return pv.RequestPreVote(id, target, args, resp)
}

// InstallSnapshot implements raft.Transport.
func (f *FaultTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if f.Blocked(string(id)) {
		return ErrPartitioned
	}
	return f.inner.InstallSnapshot(id, target, args, resp, data)
}

// EncodePeer implements raft.Transport.
func (f *FaultTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return f.inner.EncodePeer(id, addr)
}

// DecodePeer implements raft.Transport.
func (f *FaultTransport) DecodePeer(b []byte) raft.ServerAddress { return f.inner.DecodePeer(b) }

// SetHeartbeatHandler implements raft.Transport: heartbeats from blocked
// peers are refused too.
func (f *FaultTransport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	if cb == nil {
		f.inner.SetHeartbeatHandler(nil)
		return
	}
	f.inner.SetHeartbeatHandler(func(rpc raft.RPC) {
		if f.fromBlocked(rpc) {
			rpc.Respond(nil, ErrPartitioned)
			return
		}
		cb(rpc)
	})
}

// TimeoutNow implements raft.Transport.
func (f *FaultTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if f.Blocked(string(id)) {
		return ErrPartitioned
	}
	return f.inner.TimeoutNow(id, target, args, resp)
}

// Close implements raft.WithClose.
func (f *FaultTransport) Close() error {
	f.once.Do(func() { close(f.stop) })
	if c, ok := f.inner.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
